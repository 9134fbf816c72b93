"""Transactional messages, broker side (S20): ``half`` (the message rewrites), ``end``
(END_TRANSACTION), ``check`` (the check-back service), ``service`` (the composition)."""

from rocketlite.broker.transaction.service import TransactionalMessageService

__all__ = ["TransactionalMessageService"]
