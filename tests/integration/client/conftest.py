from clientconf import cluster  # noqa: F401 - the fixture
