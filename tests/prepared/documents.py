"""The operations the scripts send, and the jobs most scripts start from."""

from __future__ import annotations

from tests.prepared.harness import Run

JOB_FIELDS = """
fragment JobFields on Job {
  id type payload priority status retryCount maxRetries idempotencyKey producer runAt
  claimedAt workerId leaseExpiresAt error result createdAt updatedAt finishedAt __typename
}"""
USER_ERRORS = "userErrors { code message field __typename }"
ENQUEUE = f"""
mutation Enqueue($input: EnqueueJobInput!) {{
  enqueueJob(input: $input) {{ __typename created job {{ ...JobFields }} {USER_ERRORS} }}
}}{JOB_FIELDS}"""
ENQUEUE_MANY = f"""
mutation EnqueueMany($inputs: [EnqueueJobInput!]!) {{
  enqueueJobs(inputs: $inputs) {{ jobs {{ ...JobFields }} {USER_ERRORS} }}
}}{JOB_FIELDS}"""
CLAIM = f"""
mutation Claim($types: [String!], $lease: Int) {{
  claimJob(types: $types, leaseSeconds: $lease) {{ job {{ ...JobFields }} {USER_ERRORS} }}
}}{JOB_FIELDS}"""
CLAIM_MANY = f"""
mutation ClaimMany($limit: Int!, $types: [String!]) {{
  claimJobs(limit: $limit, types: $types) {{ jobs {{ ...JobFields }} {USER_ERRORS} }}
}}{JOB_FIELDS}"""
HEARTBEAT = f"""
mutation Heartbeat($id: ID!, $lease: Int) {{
  heartbeatJob(id: $id, leaseSeconds: $lease) {{ job {{ ...JobFields }} {USER_ERRORS} }}
}}{JOB_FIELDS}"""
COMPLETE = f"""
mutation Complete($id: ID!, $result: JSON) {{
  completeJob(id: $id, result: $result) {{ job {{ ...JobFields }} {USER_ERRORS} }}
}}{JOB_FIELDS}"""
FAIL = f"""
mutation Fail($id: ID!, $error: String!, $retryable: Boolean) {{
  failJob(id: $id, error: $error, retryable: $retryable) {{
    willRetry job {{ ...JobFields }} {USER_ERRORS}
  }}
}}{JOB_FIELDS}"""
CANCEL = f"""
mutation Cancel($id: ID!) {{ cancelJob(id: $id) {{ job {{ ...JobFields }} {USER_ERRORS} }} }}
{JOB_FIELDS}"""
RETRY = f"""
mutation Retry($id: ID!) {{ retryJob(id: $id) {{ job {{ ...JobFields }} {USER_ERRORS} }} }}
{JOB_FIELDS}"""
CREATE_KEY = f"""
mutation CreateKey($input: CreateApiKeyInput!) {{
  createApiKey(input: $input) {{
    secret apiKey {{ name role allowedTypes maxPriority createdAt revokedAt __typename }}
    {USER_ERRORS}
  }}
}}"""
REVOKE_KEY = "mutation Revoke($name: String!) { revokeApiKey(name: $name) }"
JOB = f"query Job($id: ID!) {{ job(id: $id) {{ ...JobFields }} }}{JOB_FIELDS}"
JOBS = f"""
query Jobs($status: JobStatus, $type: String, $first: Int, $after: String) {{
  jobs(status: $status, type: $type, first: $first, after: $after) {{
    __typename totalCount
    edges {{ cursor node {{ ...JobFields }} }}
    pageInfo {{ hasNextPage endCursor }}
    nodes {{ id status }}
  }}
}}{JOB_FIELDS}"""
STATS = """
query Stats($type: String) {
  queueStats(type: $type) { pending running completed failed cancelled __typename }
}"""
VIEWER = "query Viewer { viewer { name role allowedTypes maxPriority __typename } }"
API_KEYS = """
query Keys { apiKeys { name role allowedTypes maxPriority createdAt revokedAt } }"""


async def seed(run: Run) -> list[str]:
    """Five jobs of producer-a, the first two of them claimed by worker-a."""
    inputs = [
        {"type": "email", "payload": {"n": 1}, "priority": "HIGH"},
        {"type": "pdf", "payload": {"n": 2}, "priority": "MEDIUM"},
        {"type": "email", "payload": {"n": 3}},
        {"type": "pdf", "payload": {"n": 4}},
        {"type": "email", "payload": {"n": 5}},
    ]
    out = await run.post("seed", ENQUEUE_MANY, {"inputs": inputs}, key="producer")
    ids = [str(j["id"]) for j in out["data"]["enqueueJobs"]["jobs"]]
    await run.post("seed claim", CLAIM_MANY, {"limit": 2}, key="worker")
    return ids
