"""The NameServer (S13): broker registration, expiry and topic routes."""
