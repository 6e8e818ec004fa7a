"""The `queuelog` command: server-side commands (`main`) and the ones that talk to a running
server over HTTP (`remote`)."""
