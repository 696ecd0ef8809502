from google.protobuf import timestamp_pb2 as _timestamp_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from typing import ClassVar as _ClassVar, Iterable as _Iterable, Mapping as _Mapping, Optional as _Optional, Union as _Union

DECISION_REASON_ALLOW: DecisionReason
DECISION_REASON_ARGUMENTS_INVALID: DecisionReason
DECISION_REASON_CONDITION_UNMET: DecisionReason
DECISION_REASON_CONFIRMATION_REQUIRED: DecisionReason
DECISION_REASON_DISABLED: DecisionReason
DECISION_REASON_FORBIDDEN: DecisionReason
DECISION_REASON_INCOMPLETE_DISCOVERY: DecisionReason
DECISION_REASON_INVALID_INPUT: DecisionReason
DECISION_REASON_NOT_FOUND: DecisionReason
DECISION_REASON_POLICY_REVOKED: DecisionReason
DECISION_REASON_SERVER_CLOSED: DecisionReason
DECISION_REASON_STALE_CATALOG: DecisionReason
DECISION_REASON_STALE_POLICY: DecisionReason
DECISION_REASON_STALE_SCHEMA: DecisionReason
DECISION_REASON_UNREVIEWED: DecisionReason
DECISION_REASON_UNSPECIFIED: DecisionReason
DECISION_REASON_UNVERSIONED_SOURCE: DecisionReason
DESCRIPTOR: _descriptor.FileDescriptor
DISCOVERY_STATE_DISCOVERING: DiscoveryState
DISCOVERY_STATE_ELIGIBLE: DiscoveryState
DISCOVERY_STATE_INCOMPLETE: DiscoveryState
DISCOVERY_STATE_QUARANTINED: DiscoveryState
DISCOVERY_STATE_RETIRED: DiscoveryState
DISCOVERY_STATE_SNAPSHOT_PROVEN: DiscoveryState
DISCOVERY_STATE_UNSPECIFIED: DiscoveryState
DISCOVERY_STATE_UNVERSIONED_OBSERVATION: DiscoveryState
DISCOVERY_STATE_VALIDATING: DiscoveryState
EFFECT_CLASS_DESTRUCTIVE: EffectClass
EFFECT_CLASS_READ_ONLY: EffectClass
EFFECT_CLASS_RESERVATION: EffectClass
EFFECT_CLASS_UNSPECIFIED: EffectClass
EFFECT_CLASS_WRITE: EffectClass
POINTER_MOVE_ACTIVATE: PointerMove
POINTER_MOVE_CLOSE: PointerMove
POINTER_MOVE_REFRESH: PointerMove
POINTER_MOVE_ROLLBACK: PointerMove
POINTER_MOVE_UNSPECIFIED: PointerMove

class CatalogReceipt(_message.Message):
    __slots__ = ["accepted_at", "audience_class", "generation", "move", "page_root", "policy_epoch", "previous_generation", "receipt_id", "run_id", "server_id", "snapshot_digest", "source_revision"]
    ACCEPTED_AT_FIELD_NUMBER: _ClassVar[int]
    AUDIENCE_CLASS_FIELD_NUMBER: _ClassVar[int]
    GENERATION_FIELD_NUMBER: _ClassVar[int]
    MOVE_FIELD_NUMBER: _ClassVar[int]
    PAGE_ROOT_FIELD_NUMBER: _ClassVar[int]
    POLICY_EPOCH_FIELD_NUMBER: _ClassVar[int]
    PREVIOUS_GENERATION_FIELD_NUMBER: _ClassVar[int]
    RECEIPT_ID_FIELD_NUMBER: _ClassVar[int]
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    SERVER_ID_FIELD_NUMBER: _ClassVar[int]
    SNAPSHOT_DIGEST_FIELD_NUMBER: _ClassVar[int]
    SOURCE_REVISION_FIELD_NUMBER: _ClassVar[int]
    accepted_at: _timestamp_pb2.Timestamp
    audience_class: str
    generation: int
    move: PointerMove
    page_root: str
    policy_epoch: int
    previous_generation: int
    receipt_id: str
    run_id: str
    server_id: str
    snapshot_digest: str
    source_revision: str
    def __init__(self, receipt_id: _Optional[str] = ..., server_id: _Optional[str] = ..., audience_class: _Optional[str] = ..., generation: _Optional[int] = ..., previous_generation: _Optional[int] = ..., source_revision: _Optional[str] = ..., page_root: _Optional[str] = ..., snapshot_digest: _Optional[str] = ..., policy_epoch: _Optional[int] = ..., accepted_at: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., run_id: _Optional[str] = ..., move: _Optional[_Union[PointerMove, str]] = ...) -> None: ...

class Heartbeat(_message.Message):
    __slots__ = ["revision", "sent_at"]
    REVISION_FIELD_NUMBER: _ClassVar[int]
    SENT_AT_FIELD_NUMBER: _ClassVar[int]
    revision: int
    sent_at: _timestamp_pb2.Timestamp
    def __init__(self, revision: _Optional[int] = ..., sent_at: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class Snapshot(_message.Message):
    __slots__ = ["audience_class", "cache_scope", "discovery_started_at", "endpoint_digest", "expires_at", "generation", "identity_digest", "page_digests", "page_root", "policy_epoch", "protocol_version", "run_id", "schema", "server_id", "snapshot_digest", "source_revision", "state", "tenant", "tools", "trust_config_digest"]
    AUDIENCE_CLASS_FIELD_NUMBER: _ClassVar[int]
    CACHE_SCOPE_FIELD_NUMBER: _ClassVar[int]
    DISCOVERY_STARTED_AT_FIELD_NUMBER: _ClassVar[int]
    ENDPOINT_DIGEST_FIELD_NUMBER: _ClassVar[int]
    EXPIRES_AT_FIELD_NUMBER: _ClassVar[int]
    GENERATION_FIELD_NUMBER: _ClassVar[int]
    IDENTITY_DIGEST_FIELD_NUMBER: _ClassVar[int]
    PAGE_DIGESTS_FIELD_NUMBER: _ClassVar[int]
    PAGE_ROOT_FIELD_NUMBER: _ClassVar[int]
    POLICY_EPOCH_FIELD_NUMBER: _ClassVar[int]
    PROTOCOL_VERSION_FIELD_NUMBER: _ClassVar[int]
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    SCHEMA_FIELD_NUMBER: _ClassVar[int]
    SERVER_ID_FIELD_NUMBER: _ClassVar[int]
    SNAPSHOT_DIGEST_FIELD_NUMBER: _ClassVar[int]
    SOURCE_REVISION_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    TENANT_FIELD_NUMBER: _ClassVar[int]
    TOOLS_FIELD_NUMBER: _ClassVar[int]
    TRUST_CONFIG_DIGEST_FIELD_NUMBER: _ClassVar[int]
    audience_class: str
    cache_scope: str
    discovery_started_at: _timestamp_pb2.Timestamp
    endpoint_digest: str
    expires_at: _timestamp_pb2.Timestamp
    generation: int
    identity_digest: str
    page_digests: _containers.RepeatedScalarFieldContainer[str]
    page_root: str
    policy_epoch: int
    protocol_version: str
    run_id: str
    schema: str
    server_id: str
    snapshot_digest: str
    source_revision: str
    state: DiscoveryState
    tenant: str
    tools: _containers.RepeatedCompositeFieldContainer[ToolDescriptor]
    trust_config_digest: str
    def __init__(self, schema: _Optional[str] = ..., server_id: _Optional[str] = ..., identity_digest: _Optional[str] = ..., endpoint_digest: _Optional[str] = ..., protocol_version: _Optional[str] = ..., audience_class: _Optional[str] = ..., tenant: _Optional[str] = ..., discovery_started_at: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., expires_at: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., policy_epoch: _Optional[int] = ..., generation: _Optional[int] = ..., source_revision: _Optional[str] = ..., page_root: _Optional[str] = ..., page_digests: _Optional[_Iterable[str]] = ..., tools: _Optional[_Iterable[_Union[ToolDescriptor, _Mapping]]] = ..., state: _Optional[_Union[DiscoveryState, str]] = ..., run_id: _Optional[str] = ..., cache_scope: _Optional[str] = ..., trust_config_digest: _Optional[str] = ..., snapshot_digest: _Optional[str] = ...) -> None: ...

class ToolAnnotations(_message.Message):
    __slots__ = ["destructive_hint", "idempotent_hint", "open_world_hint", "read_only_hint", "title"]
    DESTRUCTIVE_HINT_FIELD_NUMBER: _ClassVar[int]
    IDEMPOTENT_HINT_FIELD_NUMBER: _ClassVar[int]
    OPEN_WORLD_HINT_FIELD_NUMBER: _ClassVar[int]
    READ_ONLY_HINT_FIELD_NUMBER: _ClassVar[int]
    TITLE_FIELD_NUMBER: _ClassVar[int]
    destructive_hint: bool
    idempotent_hint: bool
    open_world_hint: bool
    read_only_hint: bool
    title: str
    def __init__(self, read_only_hint: bool = ..., destructive_hint: bool = ..., idempotent_hint: bool = ..., open_world_hint: bool = ..., title: _Optional[str] = ...) -> None: ...

class ToolDescriptor(_message.Message):
    __slots__ = ["annotations", "description", "descriptor_digest", "effect_class", "flags", "input_schema_digest", "name", "output_schema_digest", "raw", "schema_dialect", "title", "tool_id"]
    ANNOTATIONS_FIELD_NUMBER: _ClassVar[int]
    DESCRIPTION_FIELD_NUMBER: _ClassVar[int]
    DESCRIPTOR_DIGEST_FIELD_NUMBER: _ClassVar[int]
    EFFECT_CLASS_FIELD_NUMBER: _ClassVar[int]
    FLAGS_FIELD_NUMBER: _ClassVar[int]
    INPUT_SCHEMA_DIGEST_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_SCHEMA_DIGEST_FIELD_NUMBER: _ClassVar[int]
    RAW_FIELD_NUMBER: _ClassVar[int]
    SCHEMA_DIALECT_FIELD_NUMBER: _ClassVar[int]
    TITLE_FIELD_NUMBER: _ClassVar[int]
    TOOL_ID_FIELD_NUMBER: _ClassVar[int]
    annotations: ToolAnnotations
    description: str
    descriptor_digest: str
    effect_class: EffectClass
    flags: _containers.RepeatedScalarFieldContainer[str]
    input_schema_digest: str
    name: str
    output_schema_digest: str
    raw: bytes
    schema_dialect: str
    title: str
    tool_id: str
    def __init__(self, tool_id: _Optional[str] = ..., name: _Optional[str] = ..., title: _Optional[str] = ..., description: _Optional[str] = ..., descriptor_digest: _Optional[str] = ..., input_schema_digest: _Optional[str] = ..., output_schema_digest: _Optional[str] = ..., effect_class: _Optional[_Union[EffectClass, str]] = ..., raw: _Optional[bytes] = ..., annotations: _Optional[_Union[ToolAnnotations, _Mapping]] = ..., flags: _Optional[_Iterable[str]] = ..., schema_dialect: _Optional[str] = ...) -> None: ...

class EffectClass(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []

class DiscoveryState(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []

class DecisionReason(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []

class PointerMove(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []
