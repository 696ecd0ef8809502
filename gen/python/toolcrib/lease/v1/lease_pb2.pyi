from google.protobuf import timestamp_pb2 as _timestamp_pb2
from toolcrib.admission.v1 import admission_pb2 as _admission_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from typing import ClassVar as _ClassVar, Iterable as _Iterable, Mapping as _Mapping, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor
VERIFY_FAILURE_ALREADY_USED: VerifyFailure
VERIFY_FAILURE_ARGUMENTS_MISMATCH: VerifyFailure
VERIFY_FAILURE_BAD_PROOF: VerifyFailure
VERIFY_FAILURE_BAD_SIGNATURE: VerifyFailure
VERIFY_FAILURE_EXPIRED: VerifyFailure
VERIFY_FAILURE_FROZEN: VerifyFailure
VERIFY_FAILURE_OTHER_TOOL: VerifyFailure
VERIFY_FAILURE_POLICY_CHANGED: VerifyFailure
VERIFY_FAILURE_PROOF_OTHER_ARGUMENTS: VerifyFailure
VERIFY_FAILURE_PROOF_OTHER_HOLDER: VerifyFailure
VERIFY_FAILURE_PROOF_OTHER_LEASE: VerifyFailure
VERIFY_FAILURE_PROOF_STALE: VerifyFailure
VERIFY_FAILURE_PROOF_WRONG_AUDIENCE: VerifyFailure
VERIFY_FAILURE_REVOKED: VerifyFailure
VERIFY_FAILURE_STALE_CATALOG: VerifyFailure
VERIFY_FAILURE_UNKNOWN_KEY: VerifyFailure
VERIFY_FAILURE_UNSPECIFIED: VerifyFailure
VERIFY_FAILURE_WRONG_AUDIENCE: VerifyFailure

class FreezeIssuanceRequest(_message.Message):
    __slots__ = ["frozen", "reason", "server_id"]
    FROZEN_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    SERVER_ID_FIELD_NUMBER: _ClassVar[int]
    frozen: bool
    reason: str
    server_id: str
    def __init__(self, server_id: _Optional[str] = ..., frozen: bool = ..., reason: _Optional[str] = ...) -> None: ...

class FreezeIssuanceResponse(_message.Message):
    __slots__ = ["changed_at", "frozen"]
    CHANGED_AT_FIELD_NUMBER: _ClassVar[int]
    FROZEN_FIELD_NUMBER: _ClassVar[int]
    changed_at: _timestamp_pb2.Timestamp
    frozen: bool
    def __init__(self, frozen: bool = ..., changed_at: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

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

class IssueRequest(_message.Message):
    __slots__ = ["argument_digest", "audience", "check", "holder_public_key", "receipt_id", "signed_receipt", "ttl_seconds"]
    ARGUMENT_DIGEST_FIELD_NUMBER: _ClassVar[int]
    AUDIENCE_FIELD_NUMBER: _ClassVar[int]
    CHECK_FIELD_NUMBER: _ClassVar[int]
    HOLDER_PUBLIC_KEY_FIELD_NUMBER: _ClassVar[int]
    RECEIPT_ID_FIELD_NUMBER: _ClassVar[int]
    SIGNED_RECEIPT_FIELD_NUMBER: _ClassVar[int]
    TTL_SECONDS_FIELD_NUMBER: _ClassVar[int]
    argument_digest: str
    audience: str
    check: _admission_pb2.CheckRequest
    holder_public_key: bytes
    receipt_id: str
    signed_receipt: str
    ttl_seconds: int
    def __init__(self, receipt_id: _Optional[str] = ..., check: _Optional[_Union[_admission_pb2.CheckRequest, _Mapping]] = ..., argument_digest: _Optional[str] = ..., holder_public_key: _Optional[bytes] = ..., audience: _Optional[str] = ..., ttl_seconds: _Optional[int] = ..., signed_receipt: _Optional[str] = ...) -> None: ...

class IssueResponse(_message.Message):
    __slots__ = ["claims", "execution_receipt_id", "token"]
    CLAIMS_FIELD_NUMBER: _ClassVar[int]
    EXECUTION_RECEIPT_ID_FIELD_NUMBER: _ClassVar[int]
    TOKEN_FIELD_NUMBER: _ClassVar[int]
    claims: LeaseClaims
    execution_receipt_id: str
    token: str
    def __init__(self, token: _Optional[str] = ..., claims: _Optional[_Union[LeaseClaims, _Mapping]] = ..., execution_receipt_id: _Optional[str] = ...) -> None: ...

class LeaseClaims(_message.Message):
    __slots__ = ["argument_digest", "audience", "audience_class", "descriptor_digest", "expires_at", "generation", "holder_thumbprint", "issued_at", "lease_id", "policy_epoch", "receipt_id", "server_id", "subject", "tenant_id", "tool_id"]
    ARGUMENT_DIGEST_FIELD_NUMBER: _ClassVar[int]
    AUDIENCE_CLASS_FIELD_NUMBER: _ClassVar[int]
    AUDIENCE_FIELD_NUMBER: _ClassVar[int]
    DESCRIPTOR_DIGEST_FIELD_NUMBER: _ClassVar[int]
    EXPIRES_AT_FIELD_NUMBER: _ClassVar[int]
    GENERATION_FIELD_NUMBER: _ClassVar[int]
    HOLDER_THUMBPRINT_FIELD_NUMBER: _ClassVar[int]
    ISSUED_AT_FIELD_NUMBER: _ClassVar[int]
    LEASE_ID_FIELD_NUMBER: _ClassVar[int]
    POLICY_EPOCH_FIELD_NUMBER: _ClassVar[int]
    RECEIPT_ID_FIELD_NUMBER: _ClassVar[int]
    SERVER_ID_FIELD_NUMBER: _ClassVar[int]
    SUBJECT_FIELD_NUMBER: _ClassVar[int]
    TENANT_ID_FIELD_NUMBER: _ClassVar[int]
    TOOL_ID_FIELD_NUMBER: _ClassVar[int]
    argument_digest: str
    audience: str
    audience_class: str
    descriptor_digest: str
    expires_at: _timestamp_pb2.Timestamp
    generation: int
    holder_thumbprint: str
    issued_at: _timestamp_pb2.Timestamp
    lease_id: str
    policy_epoch: int
    receipt_id: str
    server_id: str
    subject: str
    tenant_id: str
    tool_id: str
    def __init__(self, lease_id: _Optional[str] = ..., subject: _Optional[str] = ..., tenant_id: _Optional[str] = ..., tool_id: _Optional[str] = ..., server_id: _Optional[str] = ..., descriptor_digest: _Optional[str] = ..., generation: _Optional[int] = ..., policy_epoch: _Optional[int] = ..., argument_digest: _Optional[str] = ..., audience: _Optional[str] = ..., holder_thumbprint: _Optional[str] = ..., issued_at: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., expires_at: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., receipt_id: _Optional[str] = ..., audience_class: _Optional[str] = ...) -> None: ...

class RedeemRequest(_message.Message):
    __slots__ = ["claims"]
    CLAIMS_FIELD_NUMBER: _ClassVar[int]
    claims: LeaseClaims
    def __init__(self, claims: _Optional[_Union[LeaseClaims, _Mapping]] = ...) -> None: ...

class RedeemResponse(_message.Message):
    __slots__ = ["detail", "failure", "valid"]
    DETAIL_FIELD_NUMBER: _ClassVar[int]
    FAILURE_FIELD_NUMBER: _ClassVar[int]
    VALID_FIELD_NUMBER: _ClassVar[int]
    detail: str
    failure: VerifyFailure
    valid: bool
    def __init__(self, valid: bool = ..., failure: _Optional[_Union[VerifyFailure, str]] = ..., detail: _Optional[str] = ...) -> None: ...

class RevokeRequest(_message.Message):
    __slots__ = ["lease_id", "reason", "server_id", "tenant_id", "tool_id"]
    LEASE_ID_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    SERVER_ID_FIELD_NUMBER: _ClassVar[int]
    TENANT_ID_FIELD_NUMBER: _ClassVar[int]
    TOOL_ID_FIELD_NUMBER: _ClassVar[int]
    lease_id: str
    reason: str
    server_id: str
    tenant_id: str
    tool_id: str
    def __init__(self, lease_id: _Optional[str] = ..., tool_id: _Optional[str] = ..., server_id: _Optional[str] = ..., tenant_id: _Optional[str] = ..., reason: _Optional[str] = ...) -> None: ...

class RevokeResponse(_message.Message):
    __slots__ = ["effective_at"]
    EFFECTIVE_AT_FIELD_NUMBER: _ClassVar[int]
    effective_at: _timestamp_pb2.Timestamp
    def __init__(self, effective_at: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class RotateSigningKeyRequest(_message.Message):
    __slots__ = ["reason"]
    REASON_FIELD_NUMBER: _ClassVar[int]
    reason: str
    def __init__(self, reason: _Optional[str] = ...) -> None: ...

class RotateSigningKeyResponse(_message.Message):
    __slots__ = ["current_key_id", "retired_key_ids", "retired_published_until", "rotated_at"]
    CURRENT_KEY_ID_FIELD_NUMBER: _ClassVar[int]
    RETIRED_KEY_IDS_FIELD_NUMBER: _ClassVar[int]
    RETIRED_PUBLISHED_UNTIL_FIELD_NUMBER: _ClassVar[int]
    ROTATED_AT_FIELD_NUMBER: _ClassVar[int]
    current_key_id: str
    retired_key_ids: _containers.RepeatedScalarFieldContainer[str]
    retired_published_until: _timestamp_pb2.Timestamp
    rotated_at: _timestamp_pb2.Timestamp
    def __init__(self, current_key_id: _Optional[str] = ..., retired_key_ids: _Optional[_Iterable[str]] = ..., rotated_at: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., retired_published_until: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class VerifyRequest(_message.Message):
    __slots__ = ["argument_digest", "audience", "proof", "token", "tool_id"]
    ARGUMENT_DIGEST_FIELD_NUMBER: _ClassVar[int]
    AUDIENCE_FIELD_NUMBER: _ClassVar[int]
    PROOF_FIELD_NUMBER: _ClassVar[int]
    TOKEN_FIELD_NUMBER: _ClassVar[int]
    TOOL_ID_FIELD_NUMBER: _ClassVar[int]
    argument_digest: str
    audience: str
    proof: str
    token: str
    tool_id: str
    def __init__(self, token: _Optional[str] = ..., proof: _Optional[str] = ..., audience: _Optional[str] = ..., argument_digest: _Optional[str] = ..., tool_id: _Optional[str] = ...) -> None: ...

class VerifyResponse(_message.Message):
    __slots__ = ["claims", "detail", "failure", "valid"]
    CLAIMS_FIELD_NUMBER: _ClassVar[int]
    DETAIL_FIELD_NUMBER: _ClassVar[int]
    FAILURE_FIELD_NUMBER: _ClassVar[int]
    VALID_FIELD_NUMBER: _ClassVar[int]
    claims: LeaseClaims
    detail: str
    failure: VerifyFailure
    valid: bool
    def __init__(self, valid: bool = ..., failure: _Optional[_Union[VerifyFailure, str]] = ..., claims: _Optional[_Union[LeaseClaims, _Mapping]] = ..., detail: _Optional[str] = ...) -> None: ...

class VerifyFailure(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []
