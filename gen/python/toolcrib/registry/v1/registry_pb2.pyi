from google.protobuf import duration_pb2 as _duration_pb2
from google.protobuf import timestamp_pb2 as _timestamp_pb2
from toolcrib.catalog.v1 import catalog_pb2 as _catalog_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from typing import ClassVar as _ClassVar, Iterable as _Iterable, Mapping as _Mapping, Optional as _Optional, Union as _Union

AUTHORIZATION_CALLER: Authorization
AUTHORIZATION_CALLER_AND_TENANT: Authorization
AUTHORIZATION_SERVICE: Authorization
AUTHORIZATION_UNSPECIFIED: Authorization
CHANGE_KIND_CREATED: ChangeKind
CHANGE_KIND_DELETED: ChangeKind
CHANGE_KIND_UNSPECIFIED: ChangeKind
CHANGE_KIND_UPDATED: ChangeKind
CONFIRMATION_ALWAYS: Confirmation
CONFIRMATION_AUTONOMOUS_ALLOWED: Confirmation
CONFIRMATION_UNSPECIFIED: Confirmation
DESCRIPTOR: _descriptor.FileDescriptor
PIN_OUTCOME_ALREADY_PINNED: PinOutcome
PIN_OUTCOME_NOT_FOUND: PinOutcome
PIN_OUTCOME_PINNED: PinOutcome
PIN_OUTCOME_UNSPECIFIED: PinOutcome
PIN_OUTCOME_VERSION_MISMATCH: PinOutcome
POLICY_CHANGE_CAUSE_AUDIENCE_CLASS: PolicyChangeCause
POLICY_CHANGE_CAUSE_CONTRACT_PUBLISHED: PolicyChangeCause
POLICY_CHANGE_CAUSE_GRANT: PolicyChangeCause
POLICY_CHANGE_CAUSE_REVOKE: PolicyChangeCause
POLICY_CHANGE_CAUSE_ROLLOUT_STAGE: PolicyChangeCause
POLICY_CHANGE_CAUSE_SERVER_TRUST: PolicyChangeCause
POLICY_CHANGE_CAUSE_TOOL_APPROVED: PolicyChangeCause
POLICY_CHANGE_CAUSE_TOOL_DISABLED: PolicyChangeCause
POLICY_CHANGE_CAUSE_TOOL_ENABLED: PolicyChangeCause
POLICY_CHANGE_CAUSE_TOOL_ROLLED_BACK: PolicyChangeCause
POLICY_CHANGE_CAUSE_UNSPECIFIED: PolicyChangeCause
REVIEW_STATE_APPROVED: ReviewState
REVIEW_STATE_PENDING_CONTRACT: ReviewState
REVIEW_STATE_UNREVIEWED: ReviewState
REVIEW_STATE_UNSPECIFIED: ReviewState
REVISION_SOURCE_NONE: RevisionSource
REVISION_SOURCE_SERVER_PROVIDED: RevisionSource
REVISION_SOURCE_UNSPECIFIED: RevisionSource
STAGE_CANARY: Stage
STAGE_FULL: Stage
STAGE_SHADOW: Stage
STAGE_UNSPECIFIED: Stage
TRUST_LEVEL_FIRST_PARTY: TrustLevel
TRUST_LEVEL_PARTNER: TrustLevel
TRUST_LEVEL_THIRD_PARTY: TrustLevel
TRUST_LEVEL_UNSPECIFIED: TrustLevel

class ApproveToolRequest(_message.Message):
    __slots__ = ["approval_digest", "comment", "tool_id"]
    APPROVAL_DIGEST_FIELD_NUMBER: _ClassVar[int]
    COMMENT_FIELD_NUMBER: _ClassVar[int]
    TOOL_ID_FIELD_NUMBER: _ClassVar[int]
    approval_digest: str
    comment: str
    tool_id: str
    def __init__(self, tool_id: _Optional[str] = ..., approval_digest: _Optional[str] = ..., comment: _Optional[str] = ...) -> None: ...

class ApproveToolResponse(_message.Message):
    __slots__ = ["tool"]
    TOOL_FIELD_NUMBER: _ClassVar[int]
    tool: Tool
    def __init__(self, tool: _Optional[_Union[Tool, _Mapping]] = ...) -> None: ...

class ApprovedVersion(_message.Message):
    __slots__ = ["approval_digest", "approved_at", "approved_by", "comment", "contract", "contract_version", "descriptor_digest"]
    APPROVAL_DIGEST_FIELD_NUMBER: _ClassVar[int]
    APPROVED_AT_FIELD_NUMBER: _ClassVar[int]
    APPROVED_BY_FIELD_NUMBER: _ClassVar[int]
    COMMENT_FIELD_NUMBER: _ClassVar[int]
    CONTRACT_FIELD_NUMBER: _ClassVar[int]
    CONTRACT_VERSION_FIELD_NUMBER: _ClassVar[int]
    DESCRIPTOR_DIGEST_FIELD_NUMBER: _ClassVar[int]
    approval_digest: str
    approved_at: _timestamp_pb2.Timestamp
    approved_by: str
    comment: str
    contract: ToolContract
    contract_version: int
    descriptor_digest: str
    def __init__(self, approval_digest: _Optional[str] = ..., descriptor_digest: _Optional[str] = ..., contract: _Optional[_Union[ToolContract, _Mapping]] = ..., contract_version: _Optional[int] = ..., approved_by: _Optional[str] = ..., approved_at: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., comment: _Optional[str] = ...) -> None: ...

class AudienceClass(_message.Message):
    __slots__ = ["description", "name", "servers", "tenant_id", "updated_at", "version"]
    DESCRIPTION_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    SERVERS_FIELD_NUMBER: _ClassVar[int]
    TENANT_ID_FIELD_NUMBER: _ClassVar[int]
    UPDATED_AT_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    description: str
    name: str
    servers: _containers.RepeatedCompositeFieldContainer[AudienceServer]
    tenant_id: str
    updated_at: _timestamp_pb2.Timestamp
    version: int
    def __init__(self, name: _Optional[str] = ..., tenant_id: _Optional[str] = ..., servers: _Optional[_Iterable[_Union[AudienceServer, _Mapping]]] = ..., description: _Optional[str] = ..., version: _Optional[int] = ..., updated_at: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class AudienceServer(_message.Message):
    __slots__ = ["secret_ref", "server_id"]
    SECRET_REF_FIELD_NUMBER: _ClassVar[int]
    SERVER_ID_FIELD_NUMBER: _ClassVar[int]
    secret_ref: str
    server_id: str
    def __init__(self, server_id: _Optional[str] = ..., secret_ref: _Optional[str] = ...) -> None: ...

class BindingResult(_message.Message):
    __slots__ = ["binding", "not_found"]
    BINDING_FIELD_NUMBER: _ClassVar[int]
    NOT_FOUND_FIELD_NUMBER: _ClassVar[int]
    binding: GetBindingResponse
    not_found: str
    def __init__(self, binding: _Optional[_Union[GetBindingResponse, _Mapping]] = ..., not_found: _Optional[str] = ...) -> None: ...

class Change(_message.Message):
    __slots__ = ["audience_class", "committed_at", "kind", "policy", "revision", "rollout_stage", "server", "tenant", "tool"]
    AUDIENCE_CLASS_FIELD_NUMBER: _ClassVar[int]
    COMMITTED_AT_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    POLICY_FIELD_NUMBER: _ClassVar[int]
    REVISION_FIELD_NUMBER: _ClassVar[int]
    ROLLOUT_STAGE_FIELD_NUMBER: _ClassVar[int]
    SERVER_FIELD_NUMBER: _ClassVar[int]
    TENANT_FIELD_NUMBER: _ClassVar[int]
    TOOL_FIELD_NUMBER: _ClassVar[int]
    audience_class: AudienceClass
    committed_at: _timestamp_pb2.Timestamp
    kind: ChangeKind
    policy: PolicyChange
    revision: int
    rollout_stage: RolloutStage
    server: Server
    tenant: Tenant
    tool: Tool
    def __init__(self, revision: _Optional[int] = ..., committed_at: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., kind: _Optional[_Union[ChangeKind, str]] = ..., server: _Optional[_Union[Server, _Mapping]] = ..., tenant: _Optional[_Union[Tenant, _Mapping]] = ..., audience_class: _Optional[_Union[AudienceClass, _Mapping]] = ..., tool: _Optional[_Union[Tool, _Mapping]] = ..., policy: _Optional[_Union[PolicyChange, _Mapping]] = ..., rollout_stage: _Optional[_Union[RolloutStage, _Mapping]] = ...) -> None: ...

class DataPolicy(_message.Message):
    __slots__ = ["classification", "personal_data", "retention_days"]
    CLASSIFICATION_FIELD_NUMBER: _ClassVar[int]
    PERSONAL_DATA_FIELD_NUMBER: _ClassVar[int]
    RETENTION_DAYS_FIELD_NUMBER: _ClassVar[int]
    classification: str
    personal_data: bool
    retention_days: int
    def __init__(self, classification: _Optional[str] = ..., personal_data: bool = ..., retention_days: _Optional[int] = ...) -> None: ...

class DeleteServerRequest(_message.Message):
    __slots__ = ["expected_version", "server_id"]
    EXPECTED_VERSION_FIELD_NUMBER: _ClassVar[int]
    SERVER_ID_FIELD_NUMBER: _ClassVar[int]
    expected_version: int
    server_id: str
    def __init__(self, server_id: _Optional[str] = ..., expected_version: _Optional[int] = ...) -> None: ...

class DeleteServerResponse(_message.Message):
    __slots__ = ["deleted_tool_ids", "server"]
    DELETED_TOOL_IDS_FIELD_NUMBER: _ClassVar[int]
    SERVER_FIELD_NUMBER: _ClassVar[int]
    deleted_tool_ids: _containers.RepeatedScalarFieldContainer[str]
    server: Server
    def __init__(self, server: _Optional[_Union[Server, _Mapping]] = ..., deleted_tool_ids: _Optional[_Iterable[str]] = ...) -> None: ...

class DisableToolRequest(_message.Message):
    __slots__ = ["reason", "tool_id"]
    REASON_FIELD_NUMBER: _ClassVar[int]
    TOOL_ID_FIELD_NUMBER: _ClassVar[int]
    reason: str
    tool_id: str
    def __init__(self, tool_id: _Optional[str] = ..., reason: _Optional[str] = ...) -> None: ...

class DisableToolResponse(_message.Message):
    __slots__ = ["tool"]
    TOOL_FIELD_NUMBER: _ClassVar[int]
    tool: Tool
    def __init__(self, tool: _Optional[_Union[Tool, _Mapping]] = ...) -> None: ...

class DownstreamMapping(_message.Message):
    __slots__ = ["destination", "identity", "operation"]
    DESTINATION_FIELD_NUMBER: _ClassVar[int]
    IDENTITY_FIELD_NUMBER: _ClassVar[int]
    OPERATION_FIELD_NUMBER: _ClassVar[int]
    destination: str
    identity: str
    operation: str
    def __init__(self, destination: _Optional[str] = ..., operation: _Optional[str] = ..., identity: _Optional[str] = ...) -> None: ...

class EnableToolRequest(_message.Message):
    __slots__ = ["tool_id"]
    TOOL_ID_FIELD_NUMBER: _ClassVar[int]
    tool_id: str
    def __init__(self, tool_id: _Optional[str] = ...) -> None: ...

class EnableToolResponse(_message.Message):
    __slots__ = ["tool"]
    TOOL_FIELD_NUMBER: _ClassVar[int]
    tool: Tool
    def __init__(self, tool: _Optional[_Union[Tool, _Mapping]] = ...) -> None: ...

class GetAudienceClassRequest(_message.Message):
    __slots__ = ["name"]
    NAME_FIELD_NUMBER: _ClassVar[int]
    name: str
    def __init__(self, name: _Optional[str] = ...) -> None: ...

class GetAudienceClassResponse(_message.Message):
    __slots__ = ["audience_class"]
    AUDIENCE_CLASS_FIELD_NUMBER: _ClassVar[int]
    audience_class: AudienceClass
    def __init__(self, audience_class: _Optional[_Union[AudienceClass, _Mapping]] = ...) -> None: ...

class GetBindingRequest(_message.Message):
    __slots__ = ["audience_class", "server_id"]
    AUDIENCE_CLASS_FIELD_NUMBER: _ClassVar[int]
    SERVER_ID_FIELD_NUMBER: _ClassVar[int]
    audience_class: str
    server_id: str
    def __init__(self, server_id: _Optional[str] = ..., audience_class: _Optional[str] = ...) -> None: ...

class GetBindingResponse(_message.Message):
    __slots__ = ["binding", "policy_epoch", "revision", "server", "tenant_id"]
    BINDING_FIELD_NUMBER: _ClassVar[int]
    POLICY_EPOCH_FIELD_NUMBER: _ClassVar[int]
    REVISION_FIELD_NUMBER: _ClassVar[int]
    SERVER_FIELD_NUMBER: _ClassVar[int]
    TENANT_ID_FIELD_NUMBER: _ClassVar[int]
    binding: AudienceServer
    policy_epoch: int
    revision: int
    server: Server
    tenant_id: str
    def __init__(self, server: _Optional[_Union[Server, _Mapping]] = ..., binding: _Optional[_Union[AudienceServer, _Mapping]] = ..., tenant_id: _Optional[str] = ..., policy_epoch: _Optional[int] = ..., revision: _Optional[int] = ...) -> None: ...

class GetBindingsRequest(_message.Message):
    __slots__ = ["reads"]
    READS_FIELD_NUMBER: _ClassVar[int]
    reads: _containers.RepeatedCompositeFieldContainer[GetBindingRequest]
    def __init__(self, reads: _Optional[_Iterable[_Union[GetBindingRequest, _Mapping]]] = ...) -> None: ...

class GetBindingsResponse(_message.Message):
    __slots__ = ["results"]
    RESULTS_FIELD_NUMBER: _ClassVar[int]
    results: _containers.RepeatedCompositeFieldContainer[BindingResult]
    def __init__(self, results: _Optional[_Iterable[_Union[BindingResult, _Mapping]]] = ...) -> None: ...

class GetPolicyRequest(_message.Message):
    __slots__ = ["at_epoch", "tenant_id"]
    AT_EPOCH_FIELD_NUMBER: _ClassVar[int]
    TENANT_ID_FIELD_NUMBER: _ClassVar[int]
    at_epoch: int
    tenant_id: str
    def __init__(self, tenant_id: _Optional[str] = ..., at_epoch: _Optional[int] = ...) -> None: ...

class GetPolicyResponse(_message.Message):
    __slots__ = ["policy", "revision"]
    POLICY_FIELD_NUMBER: _ClassVar[int]
    REVISION_FIELD_NUMBER: _ClassVar[int]
    policy: Policy
    revision: int
    def __init__(self, policy: _Optional[_Union[Policy, _Mapping]] = ..., revision: _Optional[int] = ...) -> None: ...

class GetRolloutStageRequest(_message.Message):
    __slots__ = ["audience_class", "include_history", "server_id"]
    AUDIENCE_CLASS_FIELD_NUMBER: _ClassVar[int]
    INCLUDE_HISTORY_FIELD_NUMBER: _ClassVar[int]
    SERVER_ID_FIELD_NUMBER: _ClassVar[int]
    audience_class: str
    include_history: bool
    server_id: str
    def __init__(self, server_id: _Optional[str] = ..., audience_class: _Optional[str] = ..., include_history: bool = ...) -> None: ...

class GetRolloutStageResponse(_message.Message):
    __slots__ = ["history", "rollout_stage"]
    HISTORY_FIELD_NUMBER: _ClassVar[int]
    ROLLOUT_STAGE_FIELD_NUMBER: _ClassVar[int]
    history: _containers.RepeatedCompositeFieldContainer[RolloutStage]
    rollout_stage: RolloutStage
    def __init__(self, rollout_stage: _Optional[_Union[RolloutStage, _Mapping]] = ..., history: _Optional[_Iterable[_Union[RolloutStage, _Mapping]]] = ...) -> None: ...

class GetServerRequest(_message.Message):
    __slots__ = ["server_id"]
    SERVER_ID_FIELD_NUMBER: _ClassVar[int]
    server_id: str
    def __init__(self, server_id: _Optional[str] = ...) -> None: ...

class GetServerResponse(_message.Message):
    __slots__ = ["server"]
    SERVER_FIELD_NUMBER: _ClassVar[int]
    server: Server
    def __init__(self, server: _Optional[_Union[Server, _Mapping]] = ...) -> None: ...

class GetToolRequest(_message.Message):
    __slots__ = ["include_history", "tool_id"]
    INCLUDE_HISTORY_FIELD_NUMBER: _ClassVar[int]
    TOOL_ID_FIELD_NUMBER: _ClassVar[int]
    include_history: bool
    tool_id: str
    def __init__(self, tool_id: _Optional[str] = ..., include_history: bool = ...) -> None: ...

class GetToolResponse(_message.Message):
    __slots__ = ["history", "tool"]
    HISTORY_FIELD_NUMBER: _ClassVar[int]
    TOOL_FIELD_NUMBER: _ClassVar[int]
    history: _containers.RepeatedCompositeFieldContainer[ToolEvent]
    tool: Tool
    def __init__(self, tool: _Optional[_Union[Tool, _Mapping]] = ..., history: _Optional[_Iterable[_Union[ToolEvent, _Mapping]]] = ...) -> None: ...

class GetToolReviewRequest(_message.Message):
    __slots__ = ["audience_class", "descriptor_digest", "tool_id"]
    AUDIENCE_CLASS_FIELD_NUMBER: _ClassVar[int]
    DESCRIPTOR_DIGEST_FIELD_NUMBER: _ClassVar[int]
    TOOL_ID_FIELD_NUMBER: _ClassVar[int]
    audience_class: str
    descriptor_digest: str
    tool_id: str
    def __init__(self, tool_id: _Optional[str] = ..., descriptor_digest: _Optional[str] = ..., audience_class: _Optional[str] = ...) -> None: ...

class GetToolReviewResponse(_message.Message):
    __slots__ = ["approval", "approval_digest", "approved", "audience_class", "contract", "contract_version", "current_at_source", "disabled_reason", "enabled", "policy_epoch", "review_state", "revision", "server_id", "tenant_id", "tool_id", "trust_level"]
    APPROVAL_DIGEST_FIELD_NUMBER: _ClassVar[int]
    APPROVAL_FIELD_NUMBER: _ClassVar[int]
    APPROVED_FIELD_NUMBER: _ClassVar[int]
    AUDIENCE_CLASS_FIELD_NUMBER: _ClassVar[int]
    CONTRACT_FIELD_NUMBER: _ClassVar[int]
    CONTRACT_VERSION_FIELD_NUMBER: _ClassVar[int]
    CURRENT_AT_SOURCE_FIELD_NUMBER: _ClassVar[int]
    DISABLED_REASON_FIELD_NUMBER: _ClassVar[int]
    ENABLED_FIELD_NUMBER: _ClassVar[int]
    POLICY_EPOCH_FIELD_NUMBER: _ClassVar[int]
    REVIEW_STATE_FIELD_NUMBER: _ClassVar[int]
    REVISION_FIELD_NUMBER: _ClassVar[int]
    SERVER_ID_FIELD_NUMBER: _ClassVar[int]
    TENANT_ID_FIELD_NUMBER: _ClassVar[int]
    TOOL_ID_FIELD_NUMBER: _ClassVar[int]
    TRUST_LEVEL_FIELD_NUMBER: _ClassVar[int]
    approval: ApprovedVersion
    approval_digest: str
    approved: bool
    audience_class: str
    contract: ToolContract
    contract_version: int
    current_at_source: bool
    disabled_reason: str
    enabled: bool
    policy_epoch: int
    review_state: ReviewState
    revision: int
    server_id: str
    tenant_id: str
    tool_id: str
    trust_level: TrustLevel
    def __init__(self, tool_id: _Optional[str] = ..., server_id: _Optional[str] = ..., audience_class: _Optional[str] = ..., tenant_id: _Optional[str] = ..., policy_epoch: _Optional[int] = ..., approved: bool = ..., review_state: _Optional[_Union[ReviewState, str]] = ..., enabled: bool = ..., disabled_reason: _Optional[str] = ..., approval_digest: _Optional[str] = ..., contract: _Optional[_Union[ToolContract, _Mapping]] = ..., contract_version: _Optional[int] = ..., approval: _Optional[_Union[ApprovedVersion, _Mapping]] = ..., current_at_source: bool = ..., trust_level: _Optional[_Union[TrustLevel, str]] = ..., revision: _Optional[int] = ...) -> None: ...

class Grant(_message.Message):
    __slots__ = ["audience_classes", "condition", "group", "scopes", "subject", "tenant_id", "updated_at"]
    AUDIENCE_CLASSES_FIELD_NUMBER: _ClassVar[int]
    CONDITION_FIELD_NUMBER: _ClassVar[int]
    GROUP_FIELD_NUMBER: _ClassVar[int]
    SCOPES_FIELD_NUMBER: _ClassVar[int]
    SUBJECT_FIELD_NUMBER: _ClassVar[int]
    TENANT_ID_FIELD_NUMBER: _ClassVar[int]
    UPDATED_AT_FIELD_NUMBER: _ClassVar[int]
    audience_classes: _containers.RepeatedScalarFieldContainer[str]
    condition: str
    group: str
    scopes: _containers.RepeatedScalarFieldContainer[str]
    subject: str
    tenant_id: str
    updated_at: _timestamp_pb2.Timestamp
    def __init__(self, tenant_id: _Optional[str] = ..., subject: _Optional[str] = ..., group: _Optional[str] = ..., scopes: _Optional[_Iterable[str]] = ..., audience_classes: _Optional[_Iterable[str]] = ..., updated_at: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., condition: _Optional[str] = ...) -> None: ...

class GrantScopesRequest(_message.Message):
    __slots__ = ["audience_classes", "clear_condition", "condition", "group", "scopes", "subject", "tenant_id"]
    AUDIENCE_CLASSES_FIELD_NUMBER: _ClassVar[int]
    CLEAR_CONDITION_FIELD_NUMBER: _ClassVar[int]
    CONDITION_FIELD_NUMBER: _ClassVar[int]
    GROUP_FIELD_NUMBER: _ClassVar[int]
    SCOPES_FIELD_NUMBER: _ClassVar[int]
    SUBJECT_FIELD_NUMBER: _ClassVar[int]
    TENANT_ID_FIELD_NUMBER: _ClassVar[int]
    audience_classes: _containers.RepeatedScalarFieldContainer[str]
    clear_condition: bool
    condition: str
    group: str
    scopes: _containers.RepeatedScalarFieldContainer[str]
    subject: str
    tenant_id: str
    def __init__(self, tenant_id: _Optional[str] = ..., subject: _Optional[str] = ..., group: _Optional[str] = ..., scopes: _Optional[_Iterable[str]] = ..., audience_classes: _Optional[_Iterable[str]] = ..., condition: _Optional[str] = ..., clear_condition: bool = ...) -> None: ...

class GrantScopesResponse(_message.Message):
    __slots__ = ["grant", "policy_epoch"]
    GRANT_FIELD_NUMBER: _ClassVar[int]
    POLICY_EPOCH_FIELD_NUMBER: _ClassVar[int]
    grant: Grant
    policy_epoch: int
    def __init__(self, grant: _Optional[_Union[Grant, _Mapping]] = ..., policy_epoch: _Optional[int] = ...) -> None: ...

class IdentityPin(_message.Message):
    __slots__ = ["expected_version", "identity_pin", "server_id"]
    EXPECTED_VERSION_FIELD_NUMBER: _ClassVar[int]
    IDENTITY_PIN_FIELD_NUMBER: _ClassVar[int]
    SERVER_ID_FIELD_NUMBER: _ClassVar[int]
    expected_version: int
    identity_pin: str
    server_id: str
    def __init__(self, server_id: _Optional[str] = ..., expected_version: _Optional[int] = ..., identity_pin: _Optional[str] = ...) -> None: ...

class ListAudienceClassesRequest(_message.Message):
    __slots__ = ["page_size", "page_token", "server_id", "tenant_id"]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    SERVER_ID_FIELD_NUMBER: _ClassVar[int]
    TENANT_ID_FIELD_NUMBER: _ClassVar[int]
    page_size: int
    page_token: str
    server_id: str
    tenant_id: str
    def __init__(self, tenant_id: _Optional[str] = ..., server_id: _Optional[str] = ..., page_size: _Optional[int] = ..., page_token: _Optional[str] = ...) -> None: ...

class ListAudienceClassesResponse(_message.Message):
    __slots__ = ["audience_classes", "next_page_token", "revision"]
    AUDIENCE_CLASSES_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    REVISION_FIELD_NUMBER: _ClassVar[int]
    audience_classes: _containers.RepeatedCompositeFieldContainer[AudienceClass]
    next_page_token: str
    revision: int
    def __init__(self, audience_classes: _Optional[_Iterable[_Union[AudienceClass, _Mapping]]] = ..., next_page_token: _Optional[str] = ..., revision: _Optional[int] = ...) -> None: ...

class ListRolloutStagesRequest(_message.Message):
    __slots__ = ["audience_class", "page_size", "page_token", "server_id", "tenant_id"]
    AUDIENCE_CLASS_FIELD_NUMBER: _ClassVar[int]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    SERVER_ID_FIELD_NUMBER: _ClassVar[int]
    TENANT_ID_FIELD_NUMBER: _ClassVar[int]
    audience_class: str
    page_size: int
    page_token: str
    server_id: str
    tenant_id: str
    def __init__(self, tenant_id: _Optional[str] = ..., server_id: _Optional[str] = ..., audience_class: _Optional[str] = ..., page_size: _Optional[int] = ..., page_token: _Optional[str] = ...) -> None: ...

class ListRolloutStagesResponse(_message.Message):
    __slots__ = ["next_page_token", "revision", "rollout_stages"]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    REVISION_FIELD_NUMBER: _ClassVar[int]
    ROLLOUT_STAGES_FIELD_NUMBER: _ClassVar[int]
    next_page_token: str
    revision: int
    rollout_stages: _containers.RepeatedCompositeFieldContainer[RolloutStage]
    def __init__(self, rollout_stages: _Optional[_Iterable[_Union[RolloutStage, _Mapping]]] = ..., next_page_token: _Optional[str] = ..., revision: _Optional[int] = ...) -> None: ...

class ListServersRequest(_message.Message):
    __slots__ = ["page_size", "page_token"]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    page_size: int
    page_token: str
    def __init__(self, page_size: _Optional[int] = ..., page_token: _Optional[str] = ...) -> None: ...

class ListServersResponse(_message.Message):
    __slots__ = ["next_page_token", "revision", "servers"]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    REVISION_FIELD_NUMBER: _ClassVar[int]
    SERVERS_FIELD_NUMBER: _ClassVar[int]
    next_page_token: str
    revision: int
    servers: _containers.RepeatedCompositeFieldContainer[Server]
    def __init__(self, servers: _Optional[_Iterable[_Union[Server, _Mapping]]] = ..., next_page_token: _Optional[str] = ..., revision: _Optional[int] = ...) -> None: ...

class ListToolsRequest(_message.Message):
    __slots__ = ["page_size", "page_token", "review_state", "server_id"]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    REVIEW_STATE_FIELD_NUMBER: _ClassVar[int]
    SERVER_ID_FIELD_NUMBER: _ClassVar[int]
    page_size: int
    page_token: str
    review_state: ReviewState
    server_id: str
    def __init__(self, server_id: _Optional[str] = ..., review_state: _Optional[_Union[ReviewState, str]] = ..., page_size: _Optional[int] = ..., page_token: _Optional[str] = ...) -> None: ...

class ListToolsResponse(_message.Message):
    __slots__ = ["next_page_token", "revision", "tools"]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    REVISION_FIELD_NUMBER: _ClassVar[int]
    TOOLS_FIELD_NUMBER: _ClassVar[int]
    next_page_token: str
    revision: int
    tools: _containers.RepeatedCompositeFieldContainer[Tool]
    def __init__(self, tools: _Optional[_Iterable[_Union[Tool, _Mapping]]] = ..., next_page_token: _Optional[str] = ..., revision: _Optional[int] = ...) -> None: ...

class PinIdentitiesRequest(_message.Message):
    __slots__ = ["pins"]
    PINS_FIELD_NUMBER: _ClassVar[int]
    pins: _containers.RepeatedCompositeFieldContainer[IdentityPin]
    def __init__(self, pins: _Optional[_Iterable[_Union[IdentityPin, _Mapping]]] = ...) -> None: ...

class PinIdentitiesResponse(_message.Message):
    __slots__ = ["results"]
    RESULTS_FIELD_NUMBER: _ClassVar[int]
    results: _containers.RepeatedCompositeFieldContainer[PinResult]
    def __init__(self, results: _Optional[_Iterable[_Union[PinResult, _Mapping]]] = ...) -> None: ...

class PinResult(_message.Message):
    __slots__ = ["outcome", "server"]
    OUTCOME_FIELD_NUMBER: _ClassVar[int]
    SERVER_FIELD_NUMBER: _ClassVar[int]
    outcome: PinOutcome
    server: Server
    def __init__(self, outcome: _Optional[_Union[PinOutcome, str]] = ..., server: _Optional[_Union[Server, _Mapping]] = ...) -> None: ...

class Policy(_message.Message):
    __slots__ = ["audience_classes", "grants", "policy_epoch", "rollout_stages", "tenant_id"]
    AUDIENCE_CLASSES_FIELD_NUMBER: _ClassVar[int]
    GRANTS_FIELD_NUMBER: _ClassVar[int]
    POLICY_EPOCH_FIELD_NUMBER: _ClassVar[int]
    ROLLOUT_STAGES_FIELD_NUMBER: _ClassVar[int]
    TENANT_ID_FIELD_NUMBER: _ClassVar[int]
    audience_classes: _containers.RepeatedCompositeFieldContainer[AudienceClass]
    grants: _containers.RepeatedCompositeFieldContainer[Grant]
    policy_epoch: int
    rollout_stages: _containers.RepeatedCompositeFieldContainer[RolloutStage]
    tenant_id: str
    def __init__(self, tenant_id: _Optional[str] = ..., policy_epoch: _Optional[int] = ..., grants: _Optional[_Iterable[_Union[Grant, _Mapping]]] = ..., audience_classes: _Optional[_Iterable[_Union[AudienceClass, _Mapping]]] = ..., rollout_stages: _Optional[_Iterable[_Union[RolloutStage, _Mapping]]] = ...) -> None: ...

class PolicyChange(_message.Message):
    __slots__ = ["cause", "cause_code", "grant", "policy_epoch", "tenant_id"]
    CAUSE_CODE_FIELD_NUMBER: _ClassVar[int]
    CAUSE_FIELD_NUMBER: _ClassVar[int]
    GRANT_FIELD_NUMBER: _ClassVar[int]
    POLICY_EPOCH_FIELD_NUMBER: _ClassVar[int]
    TENANT_ID_FIELD_NUMBER: _ClassVar[int]
    cause: str
    cause_code: PolicyChangeCause
    grant: Grant
    policy_epoch: int
    tenant_id: str
    def __init__(self, tenant_id: _Optional[str] = ..., policy_epoch: _Optional[int] = ..., grant: _Optional[_Union[Grant, _Mapping]] = ..., cause: _Optional[str] = ..., cause_code: _Optional[_Union[PolicyChangeCause, str]] = ...) -> None: ...

class PublishContractRequest(_message.Message):
    __slots__ = ["contract"]
    CONTRACT_FIELD_NUMBER: _ClassVar[int]
    contract: ToolContract
    def __init__(self, contract: _Optional[_Union[ToolContract, _Mapping]] = ...) -> None: ...

class PublishContractResponse(_message.Message):
    __slots__ = ["tool"]
    TOOL_FIELD_NUMBER: _ClassVar[int]
    tool: Tool
    def __init__(self, tool: _Optional[_Union[Tool, _Mapping]] = ...) -> None: ...

class PutAudienceClassRequest(_message.Message):
    __slots__ = ["audience_class", "expected_version"]
    AUDIENCE_CLASS_FIELD_NUMBER: _ClassVar[int]
    EXPECTED_VERSION_FIELD_NUMBER: _ClassVar[int]
    audience_class: AudienceClass
    expected_version: int
    def __init__(self, audience_class: _Optional[_Union[AudienceClass, _Mapping]] = ..., expected_version: _Optional[int] = ...) -> None: ...

class PutAudienceClassResponse(_message.Message):
    __slots__ = ["audience_class", "policy_epoch"]
    AUDIENCE_CLASS_FIELD_NUMBER: _ClassVar[int]
    POLICY_EPOCH_FIELD_NUMBER: _ClassVar[int]
    audience_class: AudienceClass
    policy_epoch: int
    def __init__(self, audience_class: _Optional[_Union[AudienceClass, _Mapping]] = ..., policy_epoch: _Optional[int] = ...) -> None: ...

class PutTenantRequest(_message.Message):
    __slots__ = ["tenant"]
    TENANT_FIELD_NUMBER: _ClassVar[int]
    tenant: Tenant
    def __init__(self, tenant: _Optional[_Union[Tenant, _Mapping]] = ...) -> None: ...

class PutTenantResponse(_message.Message):
    __slots__ = ["tenant"]
    TENANT_FIELD_NUMBER: _ClassVar[int]
    tenant: Tenant
    def __init__(self, tenant: _Optional[_Union[Tenant, _Mapping]] = ...) -> None: ...

class RegisterServerRequest(_message.Message):
    __slots__ = ["server"]
    SERVER_FIELD_NUMBER: _ClassVar[int]
    server: Server
    def __init__(self, server: _Optional[_Union[Server, _Mapping]] = ...) -> None: ...

class RegisterServerResponse(_message.Message):
    __slots__ = ["server"]
    SERVER_FIELD_NUMBER: _ClassVar[int]
    server: Server
    def __init__(self, server: _Optional[_Union[Server, _Mapping]] = ...) -> None: ...

class RevokeScopesRequest(_message.Message):
    __slots__ = ["audience_classes", "group", "scopes", "subject", "tenant_id"]
    AUDIENCE_CLASSES_FIELD_NUMBER: _ClassVar[int]
    GROUP_FIELD_NUMBER: _ClassVar[int]
    SCOPES_FIELD_NUMBER: _ClassVar[int]
    SUBJECT_FIELD_NUMBER: _ClassVar[int]
    TENANT_ID_FIELD_NUMBER: _ClassVar[int]
    audience_classes: _containers.RepeatedScalarFieldContainer[str]
    group: str
    scopes: _containers.RepeatedScalarFieldContainer[str]
    subject: str
    tenant_id: str
    def __init__(self, tenant_id: _Optional[str] = ..., subject: _Optional[str] = ..., group: _Optional[str] = ..., scopes: _Optional[_Iterable[str]] = ..., audience_classes: _Optional[_Iterable[str]] = ...) -> None: ...

class RevokeScopesResponse(_message.Message):
    __slots__ = ["grant", "policy_epoch"]
    GRANT_FIELD_NUMBER: _ClassVar[int]
    POLICY_EPOCH_FIELD_NUMBER: _ClassVar[int]
    grant: Grant
    policy_epoch: int
    def __init__(self, grant: _Optional[_Union[Grant, _Mapping]] = ..., policy_epoch: _Optional[int] = ...) -> None: ...

class RollbackToolRequest(_message.Message):
    __slots__ = ["reason", "tool_id"]
    REASON_FIELD_NUMBER: _ClassVar[int]
    TOOL_ID_FIELD_NUMBER: _ClassVar[int]
    reason: str
    tool_id: str
    def __init__(self, tool_id: _Optional[str] = ..., reason: _Optional[str] = ...) -> None: ...

class RollbackToolResponse(_message.Message):
    __slots__ = ["tool"]
    TOOL_FIELD_NUMBER: _ClassVar[int]
    tool: Tool
    def __init__(self, tool: _Optional[_Union[Tool, _Mapping]] = ...) -> None: ...

class RolloutStage(_message.Message):
    __slots__ = ["audience_class", "canary_effects", "canary_percent", "changed_by", "policy_epoch", "reason", "revision", "server_id", "stage", "tenant_id", "updated_at", "version"]
    AUDIENCE_CLASS_FIELD_NUMBER: _ClassVar[int]
    CANARY_EFFECTS_FIELD_NUMBER: _ClassVar[int]
    CANARY_PERCENT_FIELD_NUMBER: _ClassVar[int]
    CHANGED_BY_FIELD_NUMBER: _ClassVar[int]
    POLICY_EPOCH_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    REVISION_FIELD_NUMBER: _ClassVar[int]
    SERVER_ID_FIELD_NUMBER: _ClassVar[int]
    STAGE_FIELD_NUMBER: _ClassVar[int]
    TENANT_ID_FIELD_NUMBER: _ClassVar[int]
    UPDATED_AT_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    audience_class: str
    canary_effects: _containers.RepeatedScalarFieldContainer[_catalog_pb2.EffectClass]
    canary_percent: int
    changed_by: str
    policy_epoch: int
    reason: str
    revision: int
    server_id: str
    stage: Stage
    tenant_id: str
    updated_at: _timestamp_pb2.Timestamp
    version: int
    def __init__(self, server_id: _Optional[str] = ..., audience_class: _Optional[str] = ..., tenant_id: _Optional[str] = ..., stage: _Optional[_Union[Stage, str]] = ..., canary_percent: _Optional[int] = ..., canary_effects: _Optional[_Iterable[_Union[_catalog_pb2.EffectClass, str]]] = ..., reason: _Optional[str] = ..., changed_by: _Optional[str] = ..., version: _Optional[int] = ..., updated_at: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., policy_epoch: _Optional[int] = ..., revision: _Optional[int] = ...) -> None: ...

class Server(_message.Message):
    __slots__ = ["created_at", "description", "display_name", "identity_pin", "owner", "revision_source", "scan_interval", "server_id", "stdio", "streamable_http", "trust_level", "updated_at", "version"]
    CREATED_AT_FIELD_NUMBER: _ClassVar[int]
    DESCRIPTION_FIELD_NUMBER: _ClassVar[int]
    DISPLAY_NAME_FIELD_NUMBER: _ClassVar[int]
    IDENTITY_PIN_FIELD_NUMBER: _ClassVar[int]
    OWNER_FIELD_NUMBER: _ClassVar[int]
    REVISION_SOURCE_FIELD_NUMBER: _ClassVar[int]
    SCAN_INTERVAL_FIELD_NUMBER: _ClassVar[int]
    SERVER_ID_FIELD_NUMBER: _ClassVar[int]
    STDIO_FIELD_NUMBER: _ClassVar[int]
    STREAMABLE_HTTP_FIELD_NUMBER: _ClassVar[int]
    TRUST_LEVEL_FIELD_NUMBER: _ClassVar[int]
    UPDATED_AT_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    created_at: _timestamp_pb2.Timestamp
    description: str
    display_name: str
    identity_pin: str
    owner: str
    revision_source: RevisionSource
    scan_interval: _duration_pb2.Duration
    server_id: str
    stdio: StdioTransport
    streamable_http: StreamableHttpTransport
    trust_level: TrustLevel
    updated_at: _timestamp_pb2.Timestamp
    version: int
    def __init__(self, server_id: _Optional[str] = ..., display_name: _Optional[str] = ..., owner: _Optional[str] = ..., streamable_http: _Optional[_Union[StreamableHttpTransport, _Mapping]] = ..., stdio: _Optional[_Union[StdioTransport, _Mapping]] = ..., trust_level: _Optional[_Union[TrustLevel, str]] = ..., revision_source: _Optional[_Union[RevisionSource, str]] = ..., identity_pin: _Optional[str] = ..., scan_interval: _Optional[_Union[_duration_pb2.Duration, _Mapping]] = ..., version: _Optional[int] = ..., created_at: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., updated_at: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., description: _Optional[str] = ...) -> None: ...

class SetRolloutStageRequest(_message.Message):
    __slots__ = ["audience_class", "canary_effects", "canary_percent", "expected_version", "reason", "server_id", "stage"]
    AUDIENCE_CLASS_FIELD_NUMBER: _ClassVar[int]
    CANARY_EFFECTS_FIELD_NUMBER: _ClassVar[int]
    CANARY_PERCENT_FIELD_NUMBER: _ClassVar[int]
    EXPECTED_VERSION_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    SERVER_ID_FIELD_NUMBER: _ClassVar[int]
    STAGE_FIELD_NUMBER: _ClassVar[int]
    audience_class: str
    canary_effects: _containers.RepeatedScalarFieldContainer[_catalog_pb2.EffectClass]
    canary_percent: int
    expected_version: int
    reason: str
    server_id: str
    stage: Stage
    def __init__(self, server_id: _Optional[str] = ..., audience_class: _Optional[str] = ..., stage: _Optional[_Union[Stage, str]] = ..., canary_percent: _Optional[int] = ..., canary_effects: _Optional[_Iterable[_Union[_catalog_pb2.EffectClass, str]]] = ..., reason: _Optional[str] = ..., expected_version: _Optional[int] = ...) -> None: ...

class SetRolloutStageResponse(_message.Message):
    __slots__ = ["changed", "policy_epoch", "rollout_stage"]
    CHANGED_FIELD_NUMBER: _ClassVar[int]
    POLICY_EPOCH_FIELD_NUMBER: _ClassVar[int]
    ROLLOUT_STAGE_FIELD_NUMBER: _ClassVar[int]
    changed: bool
    policy_epoch: int
    rollout_stage: RolloutStage
    def __init__(self, rollout_stage: _Optional[_Union[RolloutStage, _Mapping]] = ..., policy_epoch: _Optional[int] = ..., changed: bool = ...) -> None: ...

class StdioTransport(_message.Message):
    __slots__ = ["args", "command", "pin_dir"]
    ARGS_FIELD_NUMBER: _ClassVar[int]
    COMMAND_FIELD_NUMBER: _ClassVar[int]
    PIN_DIR_FIELD_NUMBER: _ClassVar[int]
    args: _containers.RepeatedScalarFieldContainer[str]
    command: str
    pin_dir: str
    def __init__(self, command: _Optional[str] = ..., args: _Optional[_Iterable[str]] = ..., pin_dir: _Optional[str] = ...) -> None: ...

class StreamableHttpTransport(_message.Message):
    __slots__ = ["url"]
    URL_FIELD_NUMBER: _ClassVar[int]
    url: str
    def __init__(self, url: _Optional[str] = ...) -> None: ...

class Tenant(_message.Message):
    __slots__ = ["created_at", "display_name", "policy_epoch", "tenant_id"]
    CREATED_AT_FIELD_NUMBER: _ClassVar[int]
    DISPLAY_NAME_FIELD_NUMBER: _ClassVar[int]
    POLICY_EPOCH_FIELD_NUMBER: _ClassVar[int]
    TENANT_ID_FIELD_NUMBER: _ClassVar[int]
    created_at: _timestamp_pb2.Timestamp
    display_name: str
    policy_epoch: int
    tenant_id: str
    def __init__(self, tenant_id: _Optional[str] = ..., display_name: _Optional[str] = ..., policy_epoch: _Optional[int] = ..., created_at: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class Tool(_message.Message):
    __slots__ = ["approval_digest", "approvals", "contract", "contract_version", "descriptor_digest", "descriptor_raw", "disabled_reason", "enabled", "name", "owner", "present_at_source", "review_state", "server_id", "tool_id", "updated_at", "variants", "version"]
    APPROVALS_FIELD_NUMBER: _ClassVar[int]
    APPROVAL_DIGEST_FIELD_NUMBER: _ClassVar[int]
    CONTRACT_FIELD_NUMBER: _ClassVar[int]
    CONTRACT_VERSION_FIELD_NUMBER: _ClassVar[int]
    DESCRIPTOR_DIGEST_FIELD_NUMBER: _ClassVar[int]
    DESCRIPTOR_RAW_FIELD_NUMBER: _ClassVar[int]
    DISABLED_REASON_FIELD_NUMBER: _ClassVar[int]
    ENABLED_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    OWNER_FIELD_NUMBER: _ClassVar[int]
    PRESENT_AT_SOURCE_FIELD_NUMBER: _ClassVar[int]
    REVIEW_STATE_FIELD_NUMBER: _ClassVar[int]
    SERVER_ID_FIELD_NUMBER: _ClassVar[int]
    TOOL_ID_FIELD_NUMBER: _ClassVar[int]
    UPDATED_AT_FIELD_NUMBER: _ClassVar[int]
    VARIANTS_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    approval_digest: str
    approvals: _containers.RepeatedCompositeFieldContainer[ApprovedVersion]
    contract: ToolContract
    contract_version: int
    descriptor_digest: str
    descriptor_raw: bytes
    disabled_reason: str
    enabled: bool
    name: str
    owner: str
    present_at_source: bool
    review_state: ReviewState
    server_id: str
    tool_id: str
    updated_at: _timestamp_pb2.Timestamp
    variants: _containers.RepeatedCompositeFieldContainer[ToolVariant]
    version: int
    def __init__(self, tool_id: _Optional[str] = ..., server_id: _Optional[str] = ..., name: _Optional[str] = ..., owner: _Optional[str] = ..., review_state: _Optional[_Union[ReviewState, str]] = ..., enabled: bool = ..., descriptor_digest: _Optional[str] = ..., descriptor_raw: _Optional[bytes] = ..., present_at_source: bool = ..., contract: _Optional[_Union[ToolContract, _Mapping]] = ..., contract_version: _Optional[int] = ..., approval_digest: _Optional[str] = ..., approvals: _Optional[_Iterable[_Union[ApprovedVersion, _Mapping]]] = ..., version: _Optional[int] = ..., updated_at: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., disabled_reason: _Optional[str] = ..., variants: _Optional[_Iterable[_Union[ToolVariant, _Mapping]]] = ...) -> None: ...

class ToolContract(_message.Message):
    __slots__ = ["allow_sampling", "allowed_fields", "authorization", "confirmation", "data_policy", "deadline_ms", "downstream_mapping", "effect", "required_evidence", "result_budget_bytes", "scope", "tool_id"]
    ALLOWED_FIELDS_FIELD_NUMBER: _ClassVar[int]
    ALLOW_SAMPLING_FIELD_NUMBER: _ClassVar[int]
    AUTHORIZATION_FIELD_NUMBER: _ClassVar[int]
    CONFIRMATION_FIELD_NUMBER: _ClassVar[int]
    DATA_POLICY_FIELD_NUMBER: _ClassVar[int]
    DEADLINE_MS_FIELD_NUMBER: _ClassVar[int]
    DOWNSTREAM_MAPPING_FIELD_NUMBER: _ClassVar[int]
    EFFECT_FIELD_NUMBER: _ClassVar[int]
    REQUIRED_EVIDENCE_FIELD_NUMBER: _ClassVar[int]
    RESULT_BUDGET_BYTES_FIELD_NUMBER: _ClassVar[int]
    SCOPE_FIELD_NUMBER: _ClassVar[int]
    TOOL_ID_FIELD_NUMBER: _ClassVar[int]
    allow_sampling: bool
    allowed_fields: _containers.RepeatedScalarFieldContainer[str]
    authorization: Authorization
    confirmation: Confirmation
    data_policy: DataPolicy
    deadline_ms: int
    downstream_mapping: DownstreamMapping
    effect: _catalog_pb2.EffectClass
    required_evidence: _containers.RepeatedScalarFieldContainer[str]
    result_budget_bytes: int
    scope: str
    tool_id: str
    def __init__(self, tool_id: _Optional[str] = ..., effect: _Optional[_Union[_catalog_pb2.EffectClass, str]] = ..., scope: _Optional[str] = ..., authorization: _Optional[_Union[Authorization, str]] = ..., deadline_ms: _Optional[int] = ..., downstream_mapping: _Optional[_Union[DownstreamMapping, _Mapping]] = ..., data_policy: _Optional[_Union[DataPolicy, _Mapping]] = ..., allowed_fields: _Optional[_Iterable[str]] = ..., required_evidence: _Optional[_Iterable[str]] = ..., confirmation: _Optional[_Union[Confirmation, str]] = ..., result_budget_bytes: _Optional[int] = ..., allow_sampling: bool = ...) -> None: ...

class ToolEvent(_message.Message):
    __slots__ = ["actor", "approval_digest", "at", "audience_class", "contract", "contract_version", "descriptor_digest", "detail", "kind", "revision"]
    ACTOR_FIELD_NUMBER: _ClassVar[int]
    APPROVAL_DIGEST_FIELD_NUMBER: _ClassVar[int]
    AT_FIELD_NUMBER: _ClassVar[int]
    AUDIENCE_CLASS_FIELD_NUMBER: _ClassVar[int]
    CONTRACT_FIELD_NUMBER: _ClassVar[int]
    CONTRACT_VERSION_FIELD_NUMBER: _ClassVar[int]
    DESCRIPTOR_DIGEST_FIELD_NUMBER: _ClassVar[int]
    DETAIL_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    REVISION_FIELD_NUMBER: _ClassVar[int]
    actor: str
    approval_digest: str
    at: _timestamp_pb2.Timestamp
    audience_class: str
    contract: ToolContract
    contract_version: int
    descriptor_digest: str
    detail: str
    kind: str
    revision: int
    def __init__(self, revision: _Optional[int] = ..., kind: _Optional[str] = ..., actor: _Optional[str] = ..., at: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., descriptor_digest: _Optional[str] = ..., contract_version: _Optional[int] = ..., approval_digest: _Optional[str] = ..., detail: _Optional[str] = ..., contract: _Optional[_Union[ToolContract, _Mapping]] = ..., audience_class: _Optional[str] = ...) -> None: ...

class ToolVariant(_message.Message):
    __slots__ = ["approval_digest", "audience_class", "descriptor_digest", "descriptor_raw", "generation", "present_at_source", "review_state", "tenant_id", "updated_at"]
    APPROVAL_DIGEST_FIELD_NUMBER: _ClassVar[int]
    AUDIENCE_CLASS_FIELD_NUMBER: _ClassVar[int]
    DESCRIPTOR_DIGEST_FIELD_NUMBER: _ClassVar[int]
    DESCRIPTOR_RAW_FIELD_NUMBER: _ClassVar[int]
    GENERATION_FIELD_NUMBER: _ClassVar[int]
    PRESENT_AT_SOURCE_FIELD_NUMBER: _ClassVar[int]
    REVIEW_STATE_FIELD_NUMBER: _ClassVar[int]
    TENANT_ID_FIELD_NUMBER: _ClassVar[int]
    UPDATED_AT_FIELD_NUMBER: _ClassVar[int]
    approval_digest: str
    audience_class: str
    descriptor_digest: str
    descriptor_raw: bytes
    generation: int
    present_at_source: bool
    review_state: ReviewState
    tenant_id: str
    updated_at: _timestamp_pb2.Timestamp
    def __init__(self, audience_class: _Optional[str] = ..., tenant_id: _Optional[str] = ..., descriptor_digest: _Optional[str] = ..., descriptor_raw: _Optional[bytes] = ..., approval_digest: _Optional[str] = ..., review_state: _Optional[_Union[ReviewState, str]] = ..., present_at_source: bool = ..., generation: _Optional[int] = ..., updated_at: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class UpdateServerRequest(_message.Message):
    __slots__ = ["expected_version", "server"]
    EXPECTED_VERSION_FIELD_NUMBER: _ClassVar[int]
    SERVER_FIELD_NUMBER: _ClassVar[int]
    expected_version: int
    server: Server
    def __init__(self, server: _Optional[_Union[Server, _Mapping]] = ..., expected_version: _Optional[int] = ...) -> None: ...

class UpdateServerResponse(_message.Message):
    __slots__ = ["server"]
    SERVER_FIELD_NUMBER: _ClassVar[int]
    server: Server
    def __init__(self, server: _Optional[_Union[Server, _Mapping]] = ...) -> None: ...

class WatchRequest(_message.Message):
    __slots__ = ["from_revision"]
    FROM_REVISION_FIELD_NUMBER: _ClassVar[int]
    from_revision: int
    def __init__(self, from_revision: _Optional[int] = ...) -> None: ...

class WatchResponse(_message.Message):
    __slots__ = ["change", "heartbeat"]
    CHANGE_FIELD_NUMBER: _ClassVar[int]
    HEARTBEAT_FIELD_NUMBER: _ClassVar[int]
    change: Change
    heartbeat: _catalog_pb2.Heartbeat
    def __init__(self, change: _Optional[_Union[Change, _Mapping]] = ..., heartbeat: _Optional[_Union[_catalog_pb2.Heartbeat, _Mapping]] = ...) -> None: ...

class TrustLevel(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []

class RevisionSource(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []

class Authorization(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []

class Confirmation(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []

class ReviewState(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []

class Stage(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []

class PinOutcome(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []

class ChangeKind(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []

class PolicyChangeCause(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []
