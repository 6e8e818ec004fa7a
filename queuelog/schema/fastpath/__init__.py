"""The prepared-operation path: a short way through execution for documents clients send again
and again, behind QUEUELOG_PREPARED_OPERATIONS and the tested-versions check in `compat`."""
