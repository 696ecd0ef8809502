from google.protobuf import timestamp_pb2 as _timestamp_pb2
from toolcrib.catalog.v1 import catalog_pb2 as _catalog_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from typing import ClassVar as _ClassVar, Iterable as _Iterable, Mapping as _Mapping, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor
GUARD_RULE_MISSING_TOOL_RATE: GuardRule
GUARD_RULE_UNAUTHORIZED_EVENT: GuardRule
GUARD_RULE_UNSPECIFIED: GuardRule
INCIDENT_KIND_ALLOW_DENIED_ON_RECHECK: IncidentKind
INCIDENT_KIND_LEASE_AFTER_REVOKE: IncidentKind
INCIDENT_KIND_UNSPECIFIED: IncidentKind
POINTER_STATE_ACTIVE: PointerState
POINTER_STATE_CLOSED: PointerState
POINTER_STATE_UNSPECIFIED: PointerState
RUN_REASON_BYTE_CAP: RunReason
RUN_REASON_CAS_CONFLICT: RunReason
RUN_REASON_CREDENTIAL_UNAVAILABLE: RunReason
RUN_REASON_CURSOR_CYCLE: RunReason
RUN_REASON_DUPLICATE_TOOL_NAME: RunReason
RUN_REASON_EGRESS_REFUSED: RunReason
RUN_REASON_IDENTITY_MISMATCH: RunReason
RUN_REASON_INVALID_ICON: RunReason
RUN_REASON_INVALID_SCHEMA: RunReason
RUN_REASON_INVALID_TOOL_NAME: RunReason
RUN_REASON_LIST_CHANGED: RunReason
RUN_REASON_MALFORMED_TOOL: RunReason
RUN_REASON_MESSAGE_TOO_DEEP: RunReason
RUN_REASON_NETWORK_REF: RunReason
RUN_REASON_NOT_REGISTERED: RunReason
RUN_REASON_PAGE_CAP: RunReason
RUN_REASON_POLICY_EPOCH_CHANGED: RunReason
RUN_REASON_PROTOCOL_UNSUPPORTED: RunReason
RUN_REASON_REGISTRY_UNAVAILABLE: RunReason
RUN_REASON_REPEATED_CURSOR: RunReason
RUN_REASON_REVISION_MISMATCH: RunReason
RUN_REASON_REVISION_MISSING: RunReason
RUN_REASON_SCHEMA_TOO_DEEP: RunReason
RUN_REASON_SCHEMA_TOO_LARGE: RunReason
RUN_REASON_TOOL_CAP: RunReason
RUN_REASON_TRANSPORT_ERROR: RunReason
RUN_REASON_TRUST_CONFIG_CHANGED: RunReason
RUN_REASON_UNCHANGED: RunReason
RUN_REASON_UNKNOWN_DIALECT: RunReason
RUN_REASON_UNRESOLVED_REF: RunReason
RUN_REASON_UNSPECIFIED: RunReason
RUN_REASON_WORKER_LOST: RunReason
SCAN_TRIGGER_LISTEN_RESUMED: ScanTrigger
SCAN_TRIGGER_LIST_CHANGED: ScanTrigger
SCAN_TRIGGER_MANUAL: ScanTrigger
SCAN_TRIGGER_PERIODIC: ScanTrigger
SCAN_TRIGGER_REGISTRY_CHANGE: ScanTrigger
SCAN_TRIGGER_UNSPECIFIED: ScanTrigger

class ActivePointer(_message.Message):
    __slots__ = ["audience_class", "fresh_until", "generation", "moved_at", "page_root", "revision", "server_id", "snapshot_state", "source_revision", "state", "tenant_id"]
    AUDIENCE_CLASS_FIELD_NUMBER: _ClassVar[int]
    FRESH_UNTIL_FIELD_NUMBER: _ClassVar[int]
    GENERATION_FIELD_NUMBER: _ClassVar[int]
    MOVED_AT_FIELD_NUMBER: _ClassVar[int]
    PAGE_ROOT_FIELD_NUMBER: _ClassVar[int]
    REVISION_FIELD_NUMBER: _ClassVar[int]
    SERVER_ID_FIELD_NUMBER: _ClassVar[int]
    SNAPSHOT_STATE_FIELD_NUMBER: _ClassVar[int]
    SOURCE_REVISION_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    TENANT_ID_FIELD_NUMBER: _ClassVar[int]
    audience_class: str
    fresh_until: _timestamp_pb2.Timestamp
    generation: int
    moved_at: _timestamp_pb2.Timestamp
    page_root: str
    revision: int
    server_id: str
    snapshot_state: _catalog_pb2.DiscoveryState
    source_revision: str
    state: PointerState
    tenant_id: str
    def __init__(self, server_id: _Optional[str] = ..., audience_class: _Optional[str] = ..., tenant_id: _Optional[str] = ..., generation: _Optional[int] = ..., state: _Optional[_Union[PointerState, str]] = ..., snapshot_state: _Optional[_Union[_catalog_pb2.DiscoveryState, str]] = ..., moved_at: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., fresh_until: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., revision: _Optional[int] = ..., source_revision: _Optional[str] = ..., page_root: _Optional[str] = ...) -> None: ...

class BindGenerationRequest(_message.Message):
    __slots__ = ["audience_class", "bound_until", "generation", "run_id", "server_id"]
    AUDIENCE_CLASS_FIELD_NUMBER: _ClassVar[int]
    BOUND_UNTIL_FIELD_NUMBER: _ClassVar[int]
    GENERATION_FIELD_NUMBER: _ClassVar[int]
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    SERVER_ID_FIELD_NUMBER: _ClassVar[int]
    audience_class: str
    bound_until: _timestamp_pb2.Timestamp
    generation: int
    run_id: str
    server_id: str
    def __init__(self, server_id: _Optional[str] = ..., audience_class: _Optional[str] = ..., generation: _Optional[int] = ..., run_id: _Optional[str] = ..., bound_until: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class BindGenerationResponse(_message.Message):
    __slots__ = ["bound_until"]
    BOUND_UNTIL_FIELD_NUMBER: _ClassVar[int]
    bound_until: _timestamp_pb2.Timestamp
    def __init__(self, bound_until: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class ClosePointerRequest(_message.Message):
    __slots__ = ["audience_class", "expected_generation", "reason", "server_id"]
    AUDIENCE_CLASS_FIELD_NUMBER: _ClassVar[int]
    EXPECTED_GENERATION_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    SERVER_ID_FIELD_NUMBER: _ClassVar[int]
    audience_class: str
    expected_generation: int
    reason: str
    server_id: str
    def __init__(self, server_id: _Optional[str] = ..., audience_class: _Optional[str] = ..., expected_generation: _Optional[int] = ..., reason: _Optional[str] = ...) -> None: ...

class ClosePointerResponse(_message.Message):
    __slots__ = ["pointer", "receipt"]
    POINTER_FIELD_NUMBER: _ClassVar[int]
    RECEIPT_FIELD_NUMBER: _ClassVar[int]
    pointer: ActivePointer
    receipt: _catalog_pb2.CatalogReceipt
    def __init__(self, pointer: _Optional[_Union[ActivePointer, _Mapping]] = ..., receipt: _Optional[_Union[_catalog_pb2.CatalogReceipt, _Mapping]] = ...) -> None: ...

class Generation(_message.Message):
    __slots__ = ["active", "bound_until", "committed_at", "expires_at", "generation", "page_root", "run_id", "source_revision", "state", "tool_count"]
    ACTIVE_FIELD_NUMBER: _ClassVar[int]
    BOUND_UNTIL_FIELD_NUMBER: _ClassVar[int]
    COMMITTED_AT_FIELD_NUMBER: _ClassVar[int]
    EXPIRES_AT_FIELD_NUMBER: _ClassVar[int]
    GENERATION_FIELD_NUMBER: _ClassVar[int]
    PAGE_ROOT_FIELD_NUMBER: _ClassVar[int]
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    SOURCE_REVISION_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    TOOL_COUNT_FIELD_NUMBER: _ClassVar[int]
    active: bool
    bound_until: _timestamp_pb2.Timestamp
    committed_at: _timestamp_pb2.Timestamp
    expires_at: _timestamp_pb2.Timestamp
    generation: int
    page_root: str
    run_id: str
    source_revision: str
    state: _catalog_pb2.DiscoveryState
    tool_count: int
    def __init__(self, generation: _Optional[int] = ..., state: _Optional[_Union[_catalog_pb2.DiscoveryState, str]] = ..., source_revision: _Optional[str] = ..., page_root: _Optional[str] = ..., tool_count: _Optional[int] = ..., committed_at: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., expires_at: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., run_id: _Optional[str] = ..., active: bool = ..., bound_until: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class GetActiveSnapshotRequest(_message.Message):
    __slots__ = ["audience_class", "server_id", "tools_page_size", "tools_page_token"]
    AUDIENCE_CLASS_FIELD_NUMBER: _ClassVar[int]
    SERVER_ID_FIELD_NUMBER: _ClassVar[int]
    TOOLS_PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    TOOLS_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    audience_class: str
    server_id: str
    tools_page_size: int
    tools_page_token: str
    def __init__(self, server_id: _Optional[str] = ..., audience_class: _Optional[str] = ..., tools_page_size: _Optional[int] = ..., tools_page_token: _Optional[str] = ...) -> None: ...

class GetActiveSnapshotResponse(_message.Message):
    __slots__ = ["next_tools_page_token", "pointer", "snapshot"]
    NEXT_TOOLS_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    POINTER_FIELD_NUMBER: _ClassVar[int]
    SNAPSHOT_FIELD_NUMBER: _ClassVar[int]
    next_tools_page_token: str
    pointer: ActivePointer
    snapshot: _catalog_pb2.Snapshot
    def __init__(self, pointer: _Optional[_Union[ActivePointer, _Mapping]] = ..., snapshot: _Optional[_Union[_catalog_pb2.Snapshot, _Mapping]] = ..., next_tools_page_token: _Optional[str] = ...) -> None: ...

class GetRunComparisonRequest(_message.Message):
    __slots__ = ["audience_class", "generation", "run_id", "server_id"]
    AUDIENCE_CLASS_FIELD_NUMBER: _ClassVar[int]
    GENERATION_FIELD_NUMBER: _ClassVar[int]
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    SERVER_ID_FIELD_NUMBER: _ClassVar[int]
    audience_class: str
    generation: int
    run_id: str
    server_id: str
    def __init__(self, run_id: _Optional[str] = ..., server_id: _Optional[str] = ..., audience_class: _Optional[str] = ..., generation: _Optional[int] = ...) -> None: ...

class GetRunComparisonResponse(_message.Message):
    __slots__ = ["comparison", "current_static_list_version"]
    COMPARISON_FIELD_NUMBER: _ClassVar[int]
    CURRENT_STATIC_LIST_VERSION_FIELD_NUMBER: _ClassVar[int]
    comparison: RunComparison
    current_static_list_version: int
    def __init__(self, comparison: _Optional[_Union[RunComparison, _Mapping]] = ..., current_static_list_version: _Optional[int] = ...) -> None: ...

class GetRunRequest(_message.Message):
    __slots__ = ["include_pages", "run_id"]
    INCLUDE_PAGES_FIELD_NUMBER: _ClassVar[int]
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    include_pages: bool
    run_id: str
    def __init__(self, run_id: _Optional[str] = ..., include_pages: bool = ...) -> None: ...

class GetRunResponse(_message.Message):
    __slots__ = ["run"]
    RUN_FIELD_NUMBER: _ClassVar[int]
    run: Run
    def __init__(self, run: _Optional[_Union[Run, _Mapping]] = ...) -> None: ...

class GetSnapshotRequest(_message.Message):
    __slots__ = ["audience_class", "generation", "server_id", "tools_page_size", "tools_page_token"]
    AUDIENCE_CLASS_FIELD_NUMBER: _ClassVar[int]
    GENERATION_FIELD_NUMBER: _ClassVar[int]
    SERVER_ID_FIELD_NUMBER: _ClassVar[int]
    TOOLS_PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    TOOLS_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    audience_class: str
    generation: int
    server_id: str
    tools_page_size: int
    tools_page_token: str
    def __init__(self, server_id: _Optional[str] = ..., audience_class: _Optional[str] = ..., generation: _Optional[int] = ..., tools_page_size: _Optional[int] = ..., tools_page_token: _Optional[str] = ...) -> None: ...

class GetSnapshotResponse(_message.Message):
    __slots__ = ["next_tools_page_token", "snapshot"]
    NEXT_TOOLS_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    SNAPSHOT_FIELD_NUMBER: _ClassVar[int]
    next_tools_page_token: str
    snapshot: _catalog_pb2.Snapshot
    def __init__(self, snapshot: _Optional[_Union[_catalog_pb2.Snapshot, _Mapping]] = ..., next_tools_page_token: _Optional[str] = ...) -> None: ...

class GetStaticToolListRequest(_message.Message):
    __slots__ = ["audience_class", "server_id"]
    AUDIENCE_CLASS_FIELD_NUMBER: _ClassVar[int]
    SERVER_ID_FIELD_NUMBER: _ClassVar[int]
    audience_class: str
    server_id: str
    def __init__(self, server_id: _Optional[str] = ..., audience_class: _Optional[str] = ...) -> None: ...

class GetStaticToolListResponse(_message.Message):
    __slots__ = ["list"]
    LIST_FIELD_NUMBER: _ClassVar[int]
    list: StaticToolList
    def __init__(self, list: _Optional[_Union[StaticToolList, _Mapping]] = ...) -> None: ...

class GuardAction(_message.Message):
    __slots__ = ["action_id", "audience_class", "checks", "decided_at", "from_generation", "incident_ids", "missing", "missing_tools", "move", "previous_generation", "receipt_id", "resume_reason", "resumed_at", "resumed_by", "rule", "server_id", "threshold", "to_generation", "window_start"]
    ACTION_ID_FIELD_NUMBER: _ClassVar[int]
    AUDIENCE_CLASS_FIELD_NUMBER: _ClassVar[int]
    CHECKS_FIELD_NUMBER: _ClassVar[int]
    DECIDED_AT_FIELD_NUMBER: _ClassVar[int]
    FROM_GENERATION_FIELD_NUMBER: _ClassVar[int]
    INCIDENT_IDS_FIELD_NUMBER: _ClassVar[int]
    MISSING_FIELD_NUMBER: _ClassVar[int]
    MISSING_TOOLS_FIELD_NUMBER: _ClassVar[int]
    MOVE_FIELD_NUMBER: _ClassVar[int]
    PREVIOUS_GENERATION_FIELD_NUMBER: _ClassVar[int]
    RECEIPT_ID_FIELD_NUMBER: _ClassVar[int]
    RESUMED_AT_FIELD_NUMBER: _ClassVar[int]
    RESUMED_BY_FIELD_NUMBER: _ClassVar[int]
    RESUME_REASON_FIELD_NUMBER: _ClassVar[int]
    RULE_FIELD_NUMBER: _ClassVar[int]
    SERVER_ID_FIELD_NUMBER: _ClassVar[int]
    THRESHOLD_FIELD_NUMBER: _ClassVar[int]
    TO_GENERATION_FIELD_NUMBER: _ClassVar[int]
    WINDOW_START_FIELD_NUMBER: _ClassVar[int]
    action_id: int
    audience_class: str
    checks: int
    decided_at: _timestamp_pb2.Timestamp
    from_generation: int
    incident_ids: _containers.RepeatedScalarFieldContainer[str]
    missing: int
    missing_tools: _containers.RepeatedScalarFieldContainer[str]
    move: _catalog_pb2.PointerMove
    previous_generation: int
    receipt_id: str
    resume_reason: str
    resumed_at: _timestamp_pb2.Timestamp
    resumed_by: str
    rule: GuardRule
    server_id: str
    threshold: float
    to_generation: int
    window_start: _timestamp_pb2.Timestamp
    def __init__(self, action_id: _Optional[int] = ..., server_id: _Optional[str] = ..., audience_class: _Optional[str] = ..., rule: _Optional[_Union[GuardRule, str]] = ..., move: _Optional[_Union[_catalog_pb2.PointerMove, str]] = ..., from_generation: _Optional[int] = ..., to_generation: _Optional[int] = ..., previous_generation: _Optional[int] = ..., checks: _Optional[int] = ..., missing: _Optional[int] = ..., threshold: _Optional[float] = ..., window_start: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., missing_tools: _Optional[_Iterable[str]] = ..., incident_ids: _Optional[_Iterable[str]] = ..., receipt_id: _Optional[str] = ..., decided_at: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., resumed_at: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., resumed_by: _Optional[str] = ..., resume_reason: _Optional[str] = ...) -> None: ...

class Incident(_message.Message):
    __slots__ = ["action_id", "audience_class", "detail", "event_id", "generation", "kind", "observed_at", "reported_at", "reported_by", "server_id", "tenant_id"]
    ACTION_ID_FIELD_NUMBER: _ClassVar[int]
    AUDIENCE_CLASS_FIELD_NUMBER: _ClassVar[int]
    DETAIL_FIELD_NUMBER: _ClassVar[int]
    EVENT_ID_FIELD_NUMBER: _ClassVar[int]
    GENERATION_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    OBSERVED_AT_FIELD_NUMBER: _ClassVar[int]
    REPORTED_AT_FIELD_NUMBER: _ClassVar[int]
    REPORTED_BY_FIELD_NUMBER: _ClassVar[int]
    SERVER_ID_FIELD_NUMBER: _ClassVar[int]
    TENANT_ID_FIELD_NUMBER: _ClassVar[int]
    action_id: int
    audience_class: str
    detail: str
    event_id: str
    generation: int
    kind: IncidentKind
    observed_at: _timestamp_pb2.Timestamp
    reported_at: _timestamp_pb2.Timestamp
    reported_by: str
    server_id: str
    tenant_id: str
    def __init__(self, event_id: _Optional[str] = ..., kind: _Optional[_Union[IncidentKind, str]] = ..., server_id: _Optional[str] = ..., audience_class: _Optional[str] = ..., generation: _Optional[int] = ..., tenant_id: _Optional[str] = ..., observed_at: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., detail: _Optional[str] = ..., reported_by: _Optional[str] = ..., reported_at: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., action_id: _Optional[int] = ...) -> None: ...

class ListGenerationsRequest(_message.Message):
    __slots__ = ["audience_class", "page_size", "page_token", "server_id"]
    AUDIENCE_CLASS_FIELD_NUMBER: _ClassVar[int]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    SERVER_ID_FIELD_NUMBER: _ClassVar[int]
    audience_class: str
    page_size: int
    page_token: str
    server_id: str
    def __init__(self, server_id: _Optional[str] = ..., audience_class: _Optional[str] = ..., page_size: _Optional[int] = ..., page_token: _Optional[str] = ...) -> None: ...

class ListGenerationsResponse(_message.Message):
    __slots__ = ["generations", "next_page_token"]
    GENERATIONS_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    generations: _containers.RepeatedCompositeFieldContainer[Generation]
    next_page_token: str
    def __init__(self, generations: _Optional[_Iterable[_Union[Generation, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class ListGuardActionsRequest(_message.Message):
    __slots__ = ["audience_class", "held_only", "page_size", "page_token", "server_id"]
    AUDIENCE_CLASS_FIELD_NUMBER: _ClassVar[int]
    HELD_ONLY_FIELD_NUMBER: _ClassVar[int]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    SERVER_ID_FIELD_NUMBER: _ClassVar[int]
    audience_class: str
    held_only: bool
    page_size: int
    page_token: str
    server_id: str
    def __init__(self, server_id: _Optional[str] = ..., audience_class: _Optional[str] = ..., held_only: bool = ..., page_size: _Optional[int] = ..., page_token: _Optional[str] = ...) -> None: ...

class ListGuardActionsResponse(_message.Message):
    __slots__ = ["actions", "next_page_token"]
    ACTIONS_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    actions: _containers.RepeatedCompositeFieldContainer[GuardAction]
    next_page_token: str
    def __init__(self, actions: _Optional[_Iterable[_Union[GuardAction, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class ListRunsRequest(_message.Message):
    __slots__ = ["audience_class", "page_size", "page_token", "scan_id", "server_id", "states"]
    AUDIENCE_CLASS_FIELD_NUMBER: _ClassVar[int]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    SCAN_ID_FIELD_NUMBER: _ClassVar[int]
    SERVER_ID_FIELD_NUMBER: _ClassVar[int]
    STATES_FIELD_NUMBER: _ClassVar[int]
    audience_class: str
    page_size: int
    page_token: str
    scan_id: str
    server_id: str
    states: _containers.RepeatedScalarFieldContainer[_catalog_pb2.DiscoveryState]
    def __init__(self, server_id: _Optional[str] = ..., audience_class: _Optional[str] = ..., scan_id: _Optional[str] = ..., states: _Optional[_Iterable[_Union[_catalog_pb2.DiscoveryState, str]]] = ..., page_size: _Optional[int] = ..., page_token: _Optional[str] = ...) -> None: ...

class ListRunsResponse(_message.Message):
    __slots__ = ["next_page_token", "runs"]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    RUNS_FIELD_NUMBER: _ClassVar[int]
    next_page_token: str
    runs: _containers.RepeatedCompositeFieldContainer[Run]
    def __init__(self, runs: _Optional[_Iterable[_Union[Run, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class Page(_message.Message):
    __slots__ = ["bytes", "cursor_in", "cursor_out", "has_next", "index", "page_digest", "received_at", "revision", "tool_count"]
    BYTES_FIELD_NUMBER: _ClassVar[int]
    CURSOR_IN_FIELD_NUMBER: _ClassVar[int]
    CURSOR_OUT_FIELD_NUMBER: _ClassVar[int]
    HAS_NEXT_FIELD_NUMBER: _ClassVar[int]
    INDEX_FIELD_NUMBER: _ClassVar[int]
    PAGE_DIGEST_FIELD_NUMBER: _ClassVar[int]
    RECEIVED_AT_FIELD_NUMBER: _ClassVar[int]
    REVISION_FIELD_NUMBER: _ClassVar[int]
    TOOL_COUNT_FIELD_NUMBER: _ClassVar[int]
    bytes: int
    cursor_in: str
    cursor_out: str
    has_next: bool
    index: int
    page_digest: str
    received_at: _timestamp_pb2.Timestamp
    revision: str
    tool_count: int
    def __init__(self, index: _Optional[int] = ..., cursor_in: _Optional[str] = ..., cursor_out: _Optional[str] = ..., has_next: bool = ..., revision: _Optional[str] = ..., tool_count: _Optional[int] = ..., page_digest: _Optional[str] = ..., bytes: _Optional[int] = ..., received_at: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class PointerChange(_message.Message):
    __slots__ = ["pointer", "receipt", "revision"]
    POINTER_FIELD_NUMBER: _ClassVar[int]
    RECEIPT_FIELD_NUMBER: _ClassVar[int]
    REVISION_FIELD_NUMBER: _ClassVar[int]
    pointer: ActivePointer
    receipt: _catalog_pb2.CatalogReceipt
    revision: int
    def __init__(self, revision: _Optional[int] = ..., pointer: _Optional[_Union[ActivePointer, _Mapping]] = ..., receipt: _Optional[_Union[_catalog_pb2.CatalogReceipt, _Mapping]] = ...) -> None: ...

class ReportIncidentRequest(_message.Message):
    __slots__ = ["audience_class", "detail", "event_id", "generation", "kind", "observed_at", "server_id", "tenant_id"]
    AUDIENCE_CLASS_FIELD_NUMBER: _ClassVar[int]
    DETAIL_FIELD_NUMBER: _ClassVar[int]
    EVENT_ID_FIELD_NUMBER: _ClassVar[int]
    GENERATION_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    OBSERVED_AT_FIELD_NUMBER: _ClassVar[int]
    SERVER_ID_FIELD_NUMBER: _ClassVar[int]
    TENANT_ID_FIELD_NUMBER: _ClassVar[int]
    audience_class: str
    detail: str
    event_id: str
    generation: int
    kind: IncidentKind
    observed_at: _timestamp_pb2.Timestamp
    server_id: str
    tenant_id: str
    def __init__(self, event_id: _Optional[str] = ..., kind: _Optional[_Union[IncidentKind, str]] = ..., server_id: _Optional[str] = ..., audience_class: _Optional[str] = ..., generation: _Optional[int] = ..., tenant_id: _Optional[str] = ..., observed_at: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., detail: _Optional[str] = ...) -> None: ...

class ReportIncidentResponse(_message.Message):
    __slots__ = ["duplicate", "incident"]
    DUPLICATE_FIELD_NUMBER: _ClassVar[int]
    INCIDENT_FIELD_NUMBER: _ClassVar[int]
    duplicate: bool
    incident: Incident
    def __init__(self, incident: _Optional[_Union[Incident, _Mapping]] = ..., duplicate: bool = ...) -> None: ...

class ResumeGuardRequest(_message.Message):
    __slots__ = ["audience_class", "reason", "server_id"]
    AUDIENCE_CLASS_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    SERVER_ID_FIELD_NUMBER: _ClassVar[int]
    audience_class: str
    reason: str
    server_id: str
    def __init__(self, server_id: _Optional[str] = ..., audience_class: _Optional[str] = ..., reason: _Optional[str] = ...) -> None: ...

class ResumeGuardResponse(_message.Message):
    __slots__ = ["resumed"]
    RESUMED_FIELD_NUMBER: _ClassVar[int]
    resumed: _containers.RepeatedCompositeFieldContainer[GuardAction]
    def __init__(self, resumed: _Optional[_Iterable[_Union[GuardAction, _Mapping]]] = ...) -> None: ...

class RollbackRequest(_message.Message):
    __slots__ = ["audience_class", "expected_generation", "reason", "server_id", "to_generation"]
    AUDIENCE_CLASS_FIELD_NUMBER: _ClassVar[int]
    EXPECTED_GENERATION_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    SERVER_ID_FIELD_NUMBER: _ClassVar[int]
    TO_GENERATION_FIELD_NUMBER: _ClassVar[int]
    audience_class: str
    expected_generation: int
    reason: str
    server_id: str
    to_generation: int
    def __init__(self, server_id: _Optional[str] = ..., audience_class: _Optional[str] = ..., expected_generation: _Optional[int] = ..., to_generation: _Optional[int] = ..., reason: _Optional[str] = ...) -> None: ...

class RollbackResponse(_message.Message):
    __slots__ = ["pointer", "receipt"]
    POINTER_FIELD_NUMBER: _ClassVar[int]
    RECEIPT_FIELD_NUMBER: _ClassVar[int]
    pointer: ActivePointer
    receipt: _catalog_pb2.CatalogReceipt
    def __init__(self, pointer: _Optional[_Union[ActivePointer, _Mapping]] = ..., receipt: _Optional[_Union[_catalog_pb2.CatalogReceipt, _Mapping]] = ...) -> None: ...

class Run(_message.Message):
    __slots__ = ["attempt", "audience_class", "bytes", "cache_scope", "closing_revision", "comparison", "confirmed_generation", "detail", "finished_at", "flags", "generation", "identity_digest", "notification_delay_ms", "page_count", "page_root", "pages", "policy_epoch", "protocol_version", "reason", "run_id", "scan_id", "server_id", "source_revision", "started_at", "state", "suppressed_notifications", "tenant_id", "tool_count", "trigger", "trust_config_digest", "worker"]
    ATTEMPT_FIELD_NUMBER: _ClassVar[int]
    AUDIENCE_CLASS_FIELD_NUMBER: _ClassVar[int]
    BYTES_FIELD_NUMBER: _ClassVar[int]
    CACHE_SCOPE_FIELD_NUMBER: _ClassVar[int]
    CLOSING_REVISION_FIELD_NUMBER: _ClassVar[int]
    COMPARISON_FIELD_NUMBER: _ClassVar[int]
    CONFIRMED_GENERATION_FIELD_NUMBER: _ClassVar[int]
    DETAIL_FIELD_NUMBER: _ClassVar[int]
    FINISHED_AT_FIELD_NUMBER: _ClassVar[int]
    FLAGS_FIELD_NUMBER: _ClassVar[int]
    GENERATION_FIELD_NUMBER: _ClassVar[int]
    IDENTITY_DIGEST_FIELD_NUMBER: _ClassVar[int]
    NOTIFICATION_DELAY_MS_FIELD_NUMBER: _ClassVar[int]
    PAGES_FIELD_NUMBER: _ClassVar[int]
    PAGE_COUNT_FIELD_NUMBER: _ClassVar[int]
    PAGE_ROOT_FIELD_NUMBER: _ClassVar[int]
    POLICY_EPOCH_FIELD_NUMBER: _ClassVar[int]
    PROTOCOL_VERSION_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    SCAN_ID_FIELD_NUMBER: _ClassVar[int]
    SERVER_ID_FIELD_NUMBER: _ClassVar[int]
    SOURCE_REVISION_FIELD_NUMBER: _ClassVar[int]
    STARTED_AT_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    SUPPRESSED_NOTIFICATIONS_FIELD_NUMBER: _ClassVar[int]
    TENANT_ID_FIELD_NUMBER: _ClassVar[int]
    TOOL_COUNT_FIELD_NUMBER: _ClassVar[int]
    TRIGGER_FIELD_NUMBER: _ClassVar[int]
    TRUST_CONFIG_DIGEST_FIELD_NUMBER: _ClassVar[int]
    WORKER_FIELD_NUMBER: _ClassVar[int]
    attempt: int
    audience_class: str
    bytes: int
    cache_scope: str
    closing_revision: str
    comparison: RunComparison
    confirmed_generation: int
    detail: str
    finished_at: _timestamp_pb2.Timestamp
    flags: _containers.RepeatedCompositeFieldContainer[RunFlag]
    generation: int
    identity_digest: str
    notification_delay_ms: int
    page_count: int
    page_root: str
    pages: _containers.RepeatedCompositeFieldContainer[Page]
    policy_epoch: int
    protocol_version: str
    reason: RunReason
    run_id: str
    scan_id: str
    server_id: str
    source_revision: str
    started_at: _timestamp_pb2.Timestamp
    state: _catalog_pb2.DiscoveryState
    suppressed_notifications: int
    tenant_id: str
    tool_count: int
    trigger: ScanTrigger
    trust_config_digest: str
    worker: str
    def __init__(self, run_id: _Optional[str] = ..., scan_id: _Optional[str] = ..., attempt: _Optional[int] = ..., server_id: _Optional[str] = ..., audience_class: _Optional[str] = ..., tenant_id: _Optional[str] = ..., state: _Optional[_Union[_catalog_pb2.DiscoveryState, str]] = ..., reason: _Optional[_Union[RunReason, str]] = ..., detail: _Optional[str] = ..., trigger: _Optional[_Union[ScanTrigger, str]] = ..., worker: _Optional[str] = ..., started_at: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., finished_at: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., protocol_version: _Optional[str] = ..., source_revision: _Optional[str] = ..., closing_revision: _Optional[str] = ..., page_root: _Optional[str] = ..., page_count: _Optional[int] = ..., tool_count: _Optional[int] = ..., bytes: _Optional[int] = ..., policy_epoch: _Optional[int] = ..., generation: _Optional[int] = ..., identity_digest: _Optional[str] = ..., trust_config_digest: _Optional[str] = ..., pages: _Optional[_Iterable[_Union[Page, _Mapping]]] = ..., flags: _Optional[_Iterable[_Union[RunFlag, _Mapping]]] = ..., cache_scope: _Optional[str] = ..., confirmed_generation: _Optional[int] = ..., suppressed_notifications: _Optional[int] = ..., notification_delay_ms: _Optional[int] = ..., comparison: _Optional[_Union[RunComparison, _Mapping]] = ...) -> None: ...

class RunComparison(_message.Message):
    __slots__ = ["against_previous", "against_static", "audience_class", "compared_at", "generation", "previous_generation", "run_id", "server_id", "static_list_version", "tenant_id"]
    AGAINST_PREVIOUS_FIELD_NUMBER: _ClassVar[int]
    AGAINST_STATIC_FIELD_NUMBER: _ClassVar[int]
    AUDIENCE_CLASS_FIELD_NUMBER: _ClassVar[int]
    COMPARED_AT_FIELD_NUMBER: _ClassVar[int]
    GENERATION_FIELD_NUMBER: _ClassVar[int]
    PREVIOUS_GENERATION_FIELD_NUMBER: _ClassVar[int]
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    SERVER_ID_FIELD_NUMBER: _ClassVar[int]
    STATIC_LIST_VERSION_FIELD_NUMBER: _ClassVar[int]
    TENANT_ID_FIELD_NUMBER: _ClassVar[int]
    against_previous: ToolDiff
    against_static: ToolDiff
    audience_class: str
    compared_at: _timestamp_pb2.Timestamp
    generation: int
    previous_generation: int
    run_id: str
    server_id: str
    static_list_version: int
    tenant_id: str
    def __init__(self, run_id: _Optional[str] = ..., server_id: _Optional[str] = ..., audience_class: _Optional[str] = ..., tenant_id: _Optional[str] = ..., generation: _Optional[int] = ..., static_list_version: _Optional[int] = ..., against_static: _Optional[_Union[ToolDiff, _Mapping]] = ..., previous_generation: _Optional[int] = ..., against_previous: _Optional[_Union[ToolDiff, _Mapping]] = ..., compared_at: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class RunFlag(_message.Message):
    __slots__ = ["detail", "flag", "tool_name"]
    DETAIL_FIELD_NUMBER: _ClassVar[int]
    FLAG_FIELD_NUMBER: _ClassVar[int]
    TOOL_NAME_FIELD_NUMBER: _ClassVar[int]
    detail: str
    flag: str
    tool_name: str
    def __init__(self, tool_name: _Optional[str] = ..., flag: _Optional[str] = ..., detail: _Optional[str] = ...) -> None: ...

class ScanTicket(_message.Message):
    __slots__ = ["already_queued", "audience_class", "scan_id", "server_id"]
    ALREADY_QUEUED_FIELD_NUMBER: _ClassVar[int]
    AUDIENCE_CLASS_FIELD_NUMBER: _ClassVar[int]
    SCAN_ID_FIELD_NUMBER: _ClassVar[int]
    SERVER_ID_FIELD_NUMBER: _ClassVar[int]
    already_queued: bool
    audience_class: str
    scan_id: str
    server_id: str
    def __init__(self, server_id: _Optional[str] = ..., audience_class: _Optional[str] = ..., scan_id: _Optional[str] = ..., already_queued: bool = ...) -> None: ...

class SetStaticToolListRequest(_message.Message):
    __slots__ = ["audience_class", "expected_version", "reason", "server_id", "tools"]
    AUDIENCE_CLASS_FIELD_NUMBER: _ClassVar[int]
    EXPECTED_VERSION_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    SERVER_ID_FIELD_NUMBER: _ClassVar[int]
    TOOLS_FIELD_NUMBER: _ClassVar[int]
    audience_class: str
    expected_version: int
    reason: str
    server_id: str
    tools: _containers.RepeatedCompositeFieldContainer[StaticTool]
    def __init__(self, server_id: _Optional[str] = ..., audience_class: _Optional[str] = ..., tools: _Optional[_Iterable[_Union[StaticTool, _Mapping]]] = ..., expected_version: _Optional[int] = ..., reason: _Optional[str] = ...) -> None: ...

class SetStaticToolListResponse(_message.Message):
    __slots__ = ["list"]
    LIST_FIELD_NUMBER: _ClassVar[int]
    list: StaticToolList
    def __init__(self, list: _Optional[_Union[StaticToolList, _Mapping]] = ...) -> None: ...

class StaticTool(_message.Message):
    __slots__ = ["descriptor_digest", "input_schema", "input_schema_digest", "name"]
    DESCRIPTOR_DIGEST_FIELD_NUMBER: _ClassVar[int]
    INPUT_SCHEMA_DIGEST_FIELD_NUMBER: _ClassVar[int]
    INPUT_SCHEMA_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    descriptor_digest: str
    input_schema: bytes
    input_schema_digest: str
    name: str
    def __init__(self, name: _Optional[str] = ..., descriptor_digest: _Optional[str] = ..., input_schema: _Optional[bytes] = ..., input_schema_digest: _Optional[str] = ...) -> None: ...

class StaticToolList(_message.Message):
    __slots__ = ["audience_class", "reason", "server_id", "set_at", "set_by", "tenant_id", "tools", "version"]
    AUDIENCE_CLASS_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    SERVER_ID_FIELD_NUMBER: _ClassVar[int]
    SET_AT_FIELD_NUMBER: _ClassVar[int]
    SET_BY_FIELD_NUMBER: _ClassVar[int]
    TENANT_ID_FIELD_NUMBER: _ClassVar[int]
    TOOLS_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    audience_class: str
    reason: str
    server_id: str
    set_at: _timestamp_pb2.Timestamp
    set_by: str
    tenant_id: str
    tools: _containers.RepeatedCompositeFieldContainer[StaticTool]
    version: int
    def __init__(self, server_id: _Optional[str] = ..., audience_class: _Optional[str] = ..., tenant_id: _Optional[str] = ..., tools: _Optional[_Iterable[_Union[StaticTool, _Mapping]]] = ..., version: _Optional[int] = ..., set_by: _Optional[str] = ..., set_at: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., reason: _Optional[str] = ...) -> None: ...

class ToolChange(_message.Message):
    __slots__ = ["actual_digest", "compared", "expected_digest", "name"]
    ACTUAL_DIGEST_FIELD_NUMBER: _ClassVar[int]
    COMPARED_FIELD_NUMBER: _ClassVar[int]
    EXPECTED_DIGEST_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    actual_digest: str
    compared: str
    expected_digest: str
    name: str
    def __init__(self, name: _Optional[str] = ..., compared: _Optional[str] = ..., expected_digest: _Optional[str] = ..., actual_digest: _Optional[str] = ...) -> None: ...

class ToolDiff(_message.Message):
    __slots__ = ["changed", "changed_count", "extra", "extra_count", "missing", "missing_count", "same_count", "truncated"]
    CHANGED_COUNT_FIELD_NUMBER: _ClassVar[int]
    CHANGED_FIELD_NUMBER: _ClassVar[int]
    EXTRA_COUNT_FIELD_NUMBER: _ClassVar[int]
    EXTRA_FIELD_NUMBER: _ClassVar[int]
    MISSING_COUNT_FIELD_NUMBER: _ClassVar[int]
    MISSING_FIELD_NUMBER: _ClassVar[int]
    SAME_COUNT_FIELD_NUMBER: _ClassVar[int]
    TRUNCATED_FIELD_NUMBER: _ClassVar[int]
    changed: _containers.RepeatedCompositeFieldContainer[ToolChange]
    changed_count: int
    extra: _containers.RepeatedScalarFieldContainer[str]
    extra_count: int
    missing: _containers.RepeatedScalarFieldContainer[str]
    missing_count: int
    same_count: int
    truncated: bool
    def __init__(self, missing: _Optional[_Iterable[str]] = ..., extra: _Optional[_Iterable[str]] = ..., changed: _Optional[_Iterable[_Union[ToolChange, _Mapping]]] = ..., missing_count: _Optional[int] = ..., extra_count: _Optional[int] = ..., changed_count: _Optional[int] = ..., same_count: _Optional[int] = ..., truncated: bool = ...) -> None: ...

class TriggerScanRequest(_message.Message):
    __slots__ = ["audience_class", "server_id"]
    AUDIENCE_CLASS_FIELD_NUMBER: _ClassVar[int]
    SERVER_ID_FIELD_NUMBER: _ClassVar[int]
    audience_class: str
    server_id: str
    def __init__(self, server_id: _Optional[str] = ..., audience_class: _Optional[str] = ...) -> None: ...

class TriggerScanResponse(_message.Message):
    __slots__ = ["scans"]
    SCANS_FIELD_NUMBER: _ClassVar[int]
    scans: _containers.RepeatedCompositeFieldContainer[ScanTicket]
    def __init__(self, scans: _Optional[_Iterable[_Union[ScanTicket, _Mapping]]] = ...) -> None: ...

class WatchRequest(_message.Message):
    __slots__ = ["from_revision"]
    FROM_REVISION_FIELD_NUMBER: _ClassVar[int]
    from_revision: int
    def __init__(self, from_revision: _Optional[int] = ...) -> None: ...

class WatchResponse(_message.Message):
    __slots__ = ["change", "heartbeat"]
    CHANGE_FIELD_NUMBER: _ClassVar[int]
    HEARTBEAT_FIELD_NUMBER: _ClassVar[int]
    change: PointerChange
    heartbeat: _catalog_pb2.Heartbeat
    def __init__(self, change: _Optional[_Union[PointerChange, _Mapping]] = ..., heartbeat: _Optional[_Union[_catalog_pb2.Heartbeat, _Mapping]] = ...) -> None: ...

class RunReason(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []

class ScanTrigger(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []

class PointerState(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []

class IncidentKind(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []

class GuardRule(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []
