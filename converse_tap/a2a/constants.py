"""Names and enum values of A2A v1.0 / v0.3 and of the converse extension, as spelled on the wire."""

CONVERSE_URI = "https://docs.radioso.ai/reference/a2a-converse-extension/v1"
CONVERSE_URI_BASE = "https://docs.radioso.ai/reference/a2a-converse-extension/"

# JSON-RPC method names: wire spelling -> canonical (v1.0) operation name.
JSONRPC_V1_METHODS = {
    name: name
    for name in (
        "SendMessage",
        "SendStreamingMessage",
        "GetTask",
        "ListTasks",
        "CancelTask",
        "SubscribeToTask",
        "CreateTaskPushNotificationConfig",
        "GetTaskPushNotificationConfig",
        "ListTaskPushNotificationConfigs",
        "DeleteTaskPushNotificationConfig",
        "GetExtendedAgentCard",
    )
}
JSONRPC_V03_METHODS = {
    "message/send": "SendMessage",
    "message/stream": "SendStreamingMessage",
    "tasks/get": "GetTask",
    "tasks/list": "ListTasks",
    "tasks/cancel": "CancelTask",
    "tasks/resubscribe": "SubscribeToTask",
    "tasks/pushNotificationConfig/set": "CreateTaskPushNotificationConfig",
    "tasks/pushNotificationConfig/get": "GetTaskPushNotificationConfig",
    "tasks/pushNotificationConfig/list": "ListTaskPushNotificationConfigs",
    "tasks/pushNotificationConfig/delete": "DeleteTaskPushNotificationConfig",
    "agent/getAuthenticatedExtendedCard": "GetExtendedAgentCard",
    "agent/authenticatedExtendedCard": "GetExtendedAgentCard",
}
# JSON-RPC names of A2A's drafts before v0.2, which v0.2 renamed (`message/send`, `message/stream`,
# `tasks/pushNotificationConfig/set|get`); agents still serve them (python-a2a sends `tasks/send`, fasta2a answers
# the push-config pair). A call is recorded as that operation, dialect v0.3 (the names of `category/action` form),
# and says `method_before_v0.2:<name>`: no client of v0.2 or later sends it
JSONRPC_V01_METHODS = {
    "tasks/send": "SendMessage",
    "tasks/sendSubscribe": "SendStreamingMessage",
    "tasks/pushNotification/set": "CreateTaskPushNotificationConfig",
    "tasks/pushNotification/get": "GetTaskPushNotificationConfig",
}
PUSH_CONFIG_METHODS = frozenset(
    {
        "CreateTaskPushNotificationConfig",
        "GetTaskPushNotificationConfig",
        "ListTaskPushNotificationConfigs",
        "DeleteTaskPushNotificationConfig",
    }
)
# v0.3 JSON-RPC results whose schema shape is no object: `tasks/pushNotificationConfig/delete` answers null and
# `.../list` an array of TaskPushNotificationConfig (v1.0 answers `{}` and `{configs, nextPageToken}`)
V03_NON_OBJECT_RESULTS: dict[str, tuple[type, ...]] = {
    "DeleteTaskPushNotificationConfig": (type(None),),
    "ListTaskPushNotificationConfigs": (list,),
}
STREAMING_METHODS = frozenset({"SendStreamingMessage", "SubscribeToTask"})
CARD_METHOD = "GetAgentCard"  # the well-known card fetch; not a JSON-RPC method, named for the exchanges table
# A push notification: the agent's POST of a task's update to the webhook a client registered (push.py). Not an
# A2A method either: the exchange is the agent's call to the client, named so in the exchanges table; its binding is
# `webhook`, and its rows' agent key PUSH_AGENT until a report attributes them to their task's agent (facts_sql.py)
PUSH_METHOD = "PushNotification"
PUSH_BINDING = "webhook"
PUSH_AGENT = "push:unattributed"

# Task states: every spelling -> the v1.0 name. Unknown values are kept verbatim by the callers.
TASK_STATES = {
    "TASK_STATE_UNSPECIFIED": "TASK_STATE_UNSPECIFIED",
    "TASK_STATE_SUBMITTED": "TASK_STATE_SUBMITTED",
    "TASK_STATE_WORKING": "TASK_STATE_WORKING",
    "TASK_STATE_INPUT_REQUIRED": "TASK_STATE_INPUT_REQUIRED",
    "TASK_STATE_AUTH_REQUIRED": "TASK_STATE_AUTH_REQUIRED",
    "TASK_STATE_COMPLETED": "TASK_STATE_COMPLETED",
    "TASK_STATE_CANCELED": "TASK_STATE_CANCELED",
    "TASK_STATE_CANCELLED": "TASK_STATE_CANCELED",
    "TASK_STATE_FAILED": "TASK_STATE_FAILED",
    "TASK_STATE_REJECTED": "TASK_STATE_REJECTED",
    "unknown": "TASK_STATE_UNSPECIFIED",
    "submitted": "TASK_STATE_SUBMITTED",
    "working": "TASK_STATE_WORKING",
    "input-required": "TASK_STATE_INPUT_REQUIRED",
    "auth-required": "TASK_STATE_AUTH_REQUIRED",
    "completed": "TASK_STATE_COMPLETED",
    "canceled": "TASK_STATE_CANCELED",
    "cancelled": "TASK_STATE_CANCELED",
    "failed": "TASK_STATE_FAILED",
    "rejected": "TASK_STATE_REJECTED",
}
# ProtoJSON parsers also accept enum numbers.
TASK_STATE_NUMBERS = {
    0: "TASK_STATE_UNSPECIFIED",
    1: "TASK_STATE_SUBMITTED",
    2: "TASK_STATE_WORKING",
    3: "TASK_STATE_COMPLETED",
    4: "TASK_STATE_FAILED",
    5: "TASK_STATE_CANCELED",
    6: "TASK_STATE_INPUT_REQUIRED",
    7: "TASK_STATE_REJECTED",
    8: "TASK_STATE_AUTH_REQUIRED",
}
TERMINAL_TASK_STATES = frozenset(
    {"TASK_STATE_COMPLETED", "TASK_STATE_CANCELED", "TASK_STATE_FAILED", "TASK_STATE_REJECTED"}
)

ROLES = {"ROLE_USER": "user", "ROLE_AGENT": "agent", "user": "user", "agent": "agent", 1: "user", 2: "agent"}

# The converse envelope's enums (spec v1).
AUTHORS = frozenset({"agent", "human"})
AVAILABILITY = frozenset({"assessed", "not_recorded", "failed", "invalid"})
COVERAGE = frozenset({"answered", "partial", "unanswered", "unclear"})
COVERAGE_REASONS = frozenset(
    {
        "sufficient_evidence",
        "insufficient_evidence",
        "conflicting_evidence",
        "ambiguous_request",
        "intentional_scope_boundary",
    }
)
OWNERSHIP_STATES = frozenset({"ai_owned", "human_owned"})
ROUTINE_STATUSES = frozenset({"active", "waiting_for_input", "waiting_for_approval", "completed", "abandoned"})
TERMINAL_ROUTINE_STATUSES = frozenset({"completed", "abandoned"})
INVOCATION_OUTCOMES = frozenset({"started", "reentered", "declined", "not_started", "unknown_tool"})

# extension URIs a row keeps per header or message (a client activates a few): a megabyte header of tens of
# thousands was as many strings in the row, and as many redactions (0.3 s of the worker for 40,000)
MAX_URIS = 64
