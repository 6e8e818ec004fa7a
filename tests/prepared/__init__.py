"""The prepared path (`queuelog/api/fastpath/`, `execute_prepared`) answers
exactly what strawberry's generic path answers.

A differential harness: one scripted sequence of requests runs twice through the real ASGI
app, each time on a fresh database, once as shipped and once with `PreparedOperations.get`
answering None (every request then takes strawberry's generic path). Only what must differ
between two runs is normalised (timestamps, generated secrets); request ids are sent by the
client, so the masked errors' `requestId` is compared as is. The transcripts (status,
headers, JSON body with its key order, and the errors logged) must be equal request by
request, and in the shipped run each request must have taken the path the script says:
prepared, prepared then sent the generic way by variables that do not coerce, or generic.

`harness` holds the two-run driver, `documents` the operations the scripts send and
`patches` what they monkeypatch in; each `test_*` module holds the scripts of one theme.
"""
