from google.protobuf import timestamp_pb2 as _timestamp_pb2
from toolcrib.catalog.v1 import catalog_pb2 as _catalog_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from typing import ClassVar as _ClassVar, Iterable as _Iterable, Mapping as _Mapping, Optional as _Optional, Union as _Union

DECISION_ALLOW: Decision
DECISION_DENY: Decision
DECISION_UNSPECIFIED: Decision
DESCRIPTOR: _descriptor.FileDescriptor
MODE_AUTONOMOUS: Mode
MODE_UNSPECIFIED: Mode
MODE_USER_CONFIRMED: Mode

class CheckRequest(_message.Message):
    __slots__ = ["arguments", "audience_class", "descriptor_digest", "generation", "mode", "policy_epoch", "run_id", "shown_digest", "tool_id"]
    ARGUMENTS_FIELD_NUMBER: _ClassVar[int]
    AUDIENCE_CLASS_FIELD_NUMBER: _ClassVar[int]
    DESCRIPTOR_DIGEST_FIELD_NUMBER: _ClassVar[int]
    GENERATION_FIELD_NUMBER: _ClassVar[int]
    MODE_FIELD_NUMBER: _ClassVar[int]
    POLICY_EPOCH_FIELD_NUMBER: _ClassVar[int]
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    SHOWN_DIGEST_FIELD_NUMBER: _ClassVar[int]
    TOOL_ID_FIELD_NUMBER: _ClassVar[int]
    arguments: bytes
    audience_class: str
    descriptor_digest: str
    generation: int
    mode: Mode
    policy_epoch: int
    run_id: str
    shown_digest: str
    tool_id: str
    def __init__(self, tool_id: _Optional[str] = ..., generation: _Optional[int] = ..., descriptor_digest: _Optional[str] = ..., policy_epoch: _Optional[int] = ..., arguments: _Optional[bytes] = ..., mode: _Optional[_Union[Mode, str]] = ..., run_id: _Optional[str] = ..., audience_class: _Optional[str] = ..., shown_digest: _Optional[str] = ...) -> None: ...

class CheckResponse(_message.Message):
    __slots__ = ["current_descriptor_digest", "current_generation", "current_policy_epoch", "decision", "detail", "reason", "receipt", "signed_receipt", "valid_until"]
    CURRENT_DESCRIPTOR_DIGEST_FIELD_NUMBER: _ClassVar[int]
    CURRENT_GENERATION_FIELD_NUMBER: _ClassVar[int]
    CURRENT_POLICY_EPOCH_FIELD_NUMBER: _ClassVar[int]
    DECISION_FIELD_NUMBER: _ClassVar[int]
    DETAIL_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    RECEIPT_FIELD_NUMBER: _ClassVar[int]
    SIGNED_RECEIPT_FIELD_NUMBER: _ClassVar[int]
    VALID_UNTIL_FIELD_NUMBER: _ClassVar[int]
    current_descriptor_digest: str
    current_generation: int
    current_policy_epoch: int
    decision: Decision
    detail: str
    reason: _catalog_pb2.DecisionReason
    receipt: Receipt
    signed_receipt: str
    valid_until: _timestamp_pb2.Timestamp
    def __init__(self, decision: _Optional[_Union[Decision, str]] = ..., reason: _Optional[_Union[_catalog_pb2.DecisionReason, str]] = ..., detail: _Optional[str] = ..., receipt: _Optional[_Union[Receipt, _Mapping]] = ..., valid_until: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., current_generation: _Optional[int] = ..., current_descriptor_digest: _Optional[str] = ..., current_policy_epoch: _Optional[int] = ..., signed_receipt: _Optional[str] = ...) -> None: ...

class CountDecisionsRequest(_message.Message):
    __slots__ = ["since", "tool_id"]
    SINCE_FIELD_NUMBER: _ClassVar[int]
    TOOL_ID_FIELD_NUMBER: _ClassVar[int]
    since: _timestamp_pb2.Timestamp
    tool_id: str
    def __init__(self, tool_id: _Optional[str] = ..., since: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class CountDecisionsResponse(_message.Message):
    __slots__ = ["all_tenants", "reasons", "total"]
    ALL_TENANTS_FIELD_NUMBER: _ClassVar[int]
    REASONS_FIELD_NUMBER: _ClassVar[int]
    TOTAL_FIELD_NUMBER: _ClassVar[int]
    all_tenants: bool
    reasons: _containers.RepeatedCompositeFieldContainer[ReasonCount]
    total: int
    def __init__(self, reasons: _Optional[_Iterable[_Union[ReasonCount, _Mapping]]] = ..., total: _Optional[int] = ..., all_tenants: bool = ...) -> None: ...

class GetReceiptRequest(_message.Message):
    __slots__ = ["receipt_id"]
    RECEIPT_ID_FIELD_NUMBER: _ClassVar[int]
    receipt_id: str
    def __init__(self, receipt_id: _Optional[str] = ...) -> None: ...

class GetReceiptResponse(_message.Message):
    __slots__ = ["receipt", "valid_until"]
    RECEIPT_FIELD_NUMBER: _ClassVar[int]
    VALID_UNTIL_FIELD_NUMBER: _ClassVar[int]
    receipt: Receipt
    valid_until: _timestamp_pb2.Timestamp
    def __init__(self, receipt: _Optional[_Union[Receipt, _Mapping]] = ..., valid_until: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class GetSigningKeysRequest(_message.Message):
    __slots__ = []
    def __init__(self) -> None: ...

class GetSigningKeysResponse(_message.Message):
    __slots__ = ["current_key_id", "jwks"]
    CURRENT_KEY_ID_FIELD_NUMBER: _ClassVar[int]
    JWKS_FIELD_NUMBER: _ClassVar[int]
    current_key_id: str
    jwks: bytes
    def __init__(self, jwks: _Optional[bytes] = ..., current_key_id: _Optional[str] = ...) -> None: ...

class ListVisibleToolsRequest(_message.Message):
    __slots__ = ["effect_classes", "max_bytes", "max_tools", "query", "run_id"]
    EFFECT_CLASSES_FIELD_NUMBER: _ClassVar[int]
    MAX_BYTES_FIELD_NUMBER: _ClassVar[int]
    MAX_TOOLS_FIELD_NUMBER: _ClassVar[int]
    QUERY_FIELD_NUMBER: _ClassVar[int]
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    effect_classes: _containers.RepeatedScalarFieldContainer[_catalog_pb2.EffectClass]
    max_bytes: int
    max_tools: int
    query: str
    run_id: str
    def __init__(self, effect_classes: _Optional[_Iterable[_Union[_catalog_pb2.EffectClass, str]]] = ..., query: _Optional[str] = ..., max_bytes: _Optional[int] = ..., max_tools: _Optional[int] = ..., run_id: _Optional[str] = ...) -> None: ...

class ListVisibleToolsResponse(_message.Message):
    __slots__ = ["policy_epoch", "servers", "tools", "truncated", "visible_count", "visible_set_digest"]
    POLICY_EPOCH_FIELD_NUMBER: _ClassVar[int]
    SERVERS_FIELD_NUMBER: _ClassVar[int]
    TOOLS_FIELD_NUMBER: _ClassVar[int]
    TRUNCATED_FIELD_NUMBER: _ClassVar[int]
    VISIBLE_COUNT_FIELD_NUMBER: _ClassVar[int]
    VISIBLE_SET_DIGEST_FIELD_NUMBER: _ClassVar[int]
    policy_epoch: int
    servers: _containers.RepeatedCompositeFieldContainer[VisibleServer]
    tools: _containers.RepeatedCompositeFieldContainer[VisibleTool]
    truncated: bool
    visible_count: int
    visible_set_digest: str
    def __init__(self, tools: _Optional[_Iterable[_Union[VisibleTool, _Mapping]]] = ..., policy_epoch: _Optional[int] = ..., truncated: bool = ..., visible_set_digest: _Optional[str] = ..., visible_count: _Optional[int] = ..., servers: _Optional[_Iterable[_Union[VisibleServer, _Mapping]]] = ...) -> None: ...

class ModelTool(_message.Message):
    __slots__ = ["description", "input_schema", "name"]
    DESCRIPTION_FIELD_NUMBER: _ClassVar[int]
    INPUT_SCHEMA_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    description: str
    input_schema: bytes
    name: str
    def __init__(self, name: _Optional[str] = ..., description: _Optional[str] = ..., input_schema: _Optional[bytes] = ...) -> None: ...

class ReasonCount(_message.Message):
    __slots__ = ["count", "reason"]
    COUNT_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    count: int
    reason: _catalog_pb2.DecisionReason
    def __init__(self, reason: _Optional[_Union[_catalog_pb2.DecisionReason, str]] = ..., count: _Optional[int] = ...) -> None: ...

class Receipt(_message.Message):
    __slots__ = ["admitting_grant", "argument_digest", "audience_class", "confirmed_at", "confirmer", "decided_at", "decision", "descriptor_digest", "effect_class", "generation", "mode", "policy_epoch", "reason", "receipt_id", "replica", "run_id", "server_id", "shown_digest", "subject", "tenant_id", "tool_id"]
    ADMITTING_GRANT_FIELD_NUMBER: _ClassVar[int]
    ARGUMENT_DIGEST_FIELD_NUMBER: _ClassVar[int]
    AUDIENCE_CLASS_FIELD_NUMBER: _ClassVar[int]
    CONFIRMED_AT_FIELD_NUMBER: _ClassVar[int]
    CONFIRMER_FIELD_NUMBER: _ClassVar[int]
    DECIDED_AT_FIELD_NUMBER: _ClassVar[int]
    DECISION_FIELD_NUMBER: _ClassVar[int]
    DESCRIPTOR_DIGEST_FIELD_NUMBER: _ClassVar[int]
    EFFECT_CLASS_FIELD_NUMBER: _ClassVar[int]
    GENERATION_FIELD_NUMBER: _ClassVar[int]
    MODE_FIELD_NUMBER: _ClassVar[int]
    POLICY_EPOCH_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    RECEIPT_ID_FIELD_NUMBER: _ClassVar[int]
    REPLICA_FIELD_NUMBER: _ClassVar[int]
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    SERVER_ID_FIELD_NUMBER: _ClassVar[int]
    SHOWN_DIGEST_FIELD_NUMBER: _ClassVar[int]
    SUBJECT_FIELD_NUMBER: _ClassVar[int]
    TENANT_ID_FIELD_NUMBER: _ClassVar[int]
    TOOL_ID_FIELD_NUMBER: _ClassVar[int]
    admitting_grant: str
    argument_digest: str
    audience_class: str
    confirmed_at: _timestamp_pb2.Timestamp
    confirmer: str
    decided_at: _timestamp_pb2.Timestamp
    decision: Decision
    descriptor_digest: str
    effect_class: _catalog_pb2.EffectClass
    generation: int
    mode: Mode
    policy_epoch: int
    reason: _catalog_pb2.DecisionReason
    receipt_id: str
    replica: str
    run_id: str
    server_id: str
    shown_digest: str
    subject: str
    tenant_id: str
    tool_id: str
    def __init__(self, receipt_id: _Optional[str] = ..., decision: _Optional[_Union[Decision, str]] = ..., reason: _Optional[_Union[_catalog_pb2.DecisionReason, str]] = ..., tenant_id: _Optional[str] = ..., subject: _Optional[str] = ..., tool_id: _Optional[str] = ..., server_id: _Optional[str] = ..., audience_class: _Optional[str] = ..., generation: _Optional[int] = ..., descriptor_digest: _Optional[str] = ..., policy_epoch: _Optional[int] = ..., argument_digest: _Optional[str] = ..., mode: _Optional[_Union[Mode, str]] = ..., run_id: _Optional[str] = ..., decided_at: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., replica: _Optional[str] = ..., effect_class: _Optional[_Union[_catalog_pb2.EffectClass, str]] = ..., confirmer: _Optional[str] = ..., confirmed_at: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., shown_digest: _Optional[str] = ..., admitting_grant: _Optional[str] = ...) -> None: ...

class RuntimeTool(_message.Message):
    __slots__ = ["audience_class", "conditional", "confirmation_required", "descriptor_digest", "effect_class", "generation", "server_id", "source_state", "tool_id"]
    AUDIENCE_CLASS_FIELD_NUMBER: _ClassVar[int]
    CONDITIONAL_FIELD_NUMBER: _ClassVar[int]
    CONFIRMATION_REQUIRED_FIELD_NUMBER: _ClassVar[int]
    DESCRIPTOR_DIGEST_FIELD_NUMBER: _ClassVar[int]
    EFFECT_CLASS_FIELD_NUMBER: _ClassVar[int]
    GENERATION_FIELD_NUMBER: _ClassVar[int]
    SERVER_ID_FIELD_NUMBER: _ClassVar[int]
    SOURCE_STATE_FIELD_NUMBER: _ClassVar[int]
    TOOL_ID_FIELD_NUMBER: _ClassVar[int]
    audience_class: str
    conditional: bool
    confirmation_required: bool
    descriptor_digest: str
    effect_class: _catalog_pb2.EffectClass
    generation: int
    server_id: str
    source_state: _catalog_pb2.DiscoveryState
    tool_id: str
    def __init__(self, tool_id: _Optional[str] = ..., server_id: _Optional[str] = ..., audience_class: _Optional[str] = ..., generation: _Optional[int] = ..., descriptor_digest: _Optional[str] = ..., effect_class: _Optional[_Union[_catalog_pb2.EffectClass, str]] = ..., source_state: _Optional[_Union[_catalog_pb2.DiscoveryState, str]] = ..., confirmation_required: bool = ..., conditional: bool = ...) -> None: ...

class SummarizeDecisionsRequest(_message.Message):
    __slots__ = ["audience_class", "generation", "server_id", "since"]
    AUDIENCE_CLASS_FIELD_NUMBER: _ClassVar[int]
    GENERATION_FIELD_NUMBER: _ClassVar[int]
    SERVER_ID_FIELD_NUMBER: _ClassVar[int]
    SINCE_FIELD_NUMBER: _ClassVar[int]
    audience_class: str
    generation: int
    server_id: str
    since: _timestamp_pb2.Timestamp
    def __init__(self, server_id: _Optional[str] = ..., audience_class: _Optional[str] = ..., generation: _Optional[int] = ..., since: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class SummarizeDecisionsResponse(_message.Message):
    __slots__ = ["checks", "tools", "truncated"]
    CHECKS_FIELD_NUMBER: _ClassVar[int]
    TOOLS_FIELD_NUMBER: _ClassVar[int]
    TRUNCATED_FIELD_NUMBER: _ClassVar[int]
    checks: int
    tools: _containers.RepeatedCompositeFieldContainer[ToolDenials]
    truncated: bool
    def __init__(self, checks: _Optional[int] = ..., tools: _Optional[_Iterable[_Union[ToolDenials, _Mapping]]] = ..., truncated: bool = ...) -> None: ...

class ToolDenials(_message.Message):
    __slots__ = ["not_found", "stale_catalog", "tool_id"]
    NOT_FOUND_FIELD_NUMBER: _ClassVar[int]
    STALE_CATALOG_FIELD_NUMBER: _ClassVar[int]
    TOOL_ID_FIELD_NUMBER: _ClassVar[int]
    not_found: int
    stale_catalog: int
    tool_id: str
    def __init__(self, tool_id: _Optional[str] = ..., not_found: _Optional[int] = ..., stale_catalog: _Optional[int] = ...) -> None: ...

class VisibleServer(_message.Message):
    __slots__ = ["audience_class", "server_id"]
    AUDIENCE_CLASS_FIELD_NUMBER: _ClassVar[int]
    SERVER_ID_FIELD_NUMBER: _ClassVar[int]
    audience_class: str
    server_id: str
    def __init__(self, server_id: _Optional[str] = ..., audience_class: _Optional[str] = ...) -> None: ...

class VisibleTool(_message.Message):
    __slots__ = ["model", "runtime"]
    MODEL_FIELD_NUMBER: _ClassVar[int]
    RUNTIME_FIELD_NUMBER: _ClassVar[int]
    model: ModelTool
    runtime: RuntimeTool
    def __init__(self, model: _Optional[_Union[ModelTool, _Mapping]] = ..., runtime: _Optional[_Union[RuntimeTool, _Mapping]] = ...) -> None: ...

class Mode(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []

class Decision(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []
