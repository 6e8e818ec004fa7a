"""Settings from QUEUELOG_* environment variables and an optional TOML file. Each setting and
TOML key is documented for users in docs/configuration.md (a test holds the two together)."""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal
from urllib.parse import urlsplit

from pydantic import BaseModel, Field, field_validator, model_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

from queuelog.domain.key_format import PREFIX, well_formed


def _is_origin(value: str) -> bool:
    """Whether `value` is a scheme, a host and an optional port, and nothing more."""
    try:
        parts = urlsplit(value.strip())
        parts.port  # noqa: B018  (raises ValueError on a port that is not one)
    except ValueError:
        return False
    return bool(
        parts.scheme
        and parts.hostname
        and parts.path in ("", "/")
        and not (parts.query or parts.fragment or parts.username)
    )


class TypeDefaults(BaseModel):
    """Per-job-type defaults, read from `[types.<name>]` tables of the TOML file."""

    model_config = {"extra": "forbid"}

    lease_seconds: int | None = Field(default=None, ge=1, le=86_400)
    backoff_base_seconds: float | None = Field(default=None, ge=0)
    backoff_max_seconds: float | None = Field(default=None, ge=0)
    # Flow control: seeds the type's row in the database where it has none yet.
    max_running: int | None = Field(default=None, ge=1)
    max_running_per_key: int | None = Field(default=None, ge=1)
    max_starts_per_second: float | None = Field(default=None, gt=0)
    paused: bool | None = None


class ScheduleConfig(BaseModel):
    """A schedule, from a `[schedules.<name>]` table of the TOML file."""

    model_config = {"extra": "forbid"}

    type: str
    cron: str
    timezone: str = "UTC"
    payload: dict[str, Any] = Field(default_factory=dict)
    priority: Literal["LOW", "MEDIUM", "HIGH", "CRITICAL"] = "LOW"
    paused: bool = False


@dataclass(frozen=True, slots=True)
class JobTypeConfig:
    name: str
    lease_seconds: int
    backoff_base_seconds: float
    backoff_max_seconds: float
    # Seeds for the `job_types` row (`service.job_types`); None: the TOML file says nothing.
    max_running: int | None = None
    max_running_per_key: int | None = None
    max_starts_per_second: float | None = None
    paused: bool | None = None

    @property
    def seeds_flow(self) -> bool:
        """Whether the TOML file sets this type's pause or limits."""
        return any(
            v is not None
            for v in (self.max_running, self.max_running_per_key, self.max_starts_per_second)
        ) or bool(self.paused)


class Settings(BaseSettings):
    # Errors never echo the values: QUEUELOG_ADMIN_KEY is a secret.
    model_config = SettingsConfigDict(
        env_prefix="QUEUELOG_", extra="ignore", hide_input_in_errors=True
    )

    database_url: str = "sqlite:///./queuelog.db"
    job_types: Annotated[tuple[str, ...], NoDecode] = ("email", "pdf", "sync")
    config: Path | None = None
    admin_key: str | None = None

    sqlite_synchronous: Literal["FULL", "NORMAL"] = "FULL"
    sqlite_busy_timeout_ms: int = Field(default=5_000, ge=0)
    pool_size: int = Field(default=8, ge=1, le=64)

    payload_max_bytes: int = Field(default=65_536, ge=1)
    request_max_bytes: int = Field(default=2 * 1024 * 1024, ge=1024)
    # the request bodies one server holds at once (each counts its Content-Length)
    request_bodies_max_bytes: int = Field(default=64 * 1024 * 1024, ge=1024)
    error_max_chars: int = Field(default=2_000, ge=64)
    default_lease_seconds: int = Field(default=300, ge=1, le=86_400)
    max_lease_seconds: int = Field(default=86_400, ge=1)
    backoff_base_seconds: float = Field(default=1.0, ge=0)
    backoff_max_seconds: float = Field(default=3_600.0, ge=0)
    # how often waiting claims try again for jobs that became due (runAt, backoff) meanwhile
    claim_recheck_seconds: float = Field(default=2.0, gt=0)
    schedule_horizon_days: int = Field(default=365, ge=1)

    retention_completed_days: float = Field(default=7.0, ge=0)
    retention_failed_days: float = Field(default=30.0, ge=0)
    prune_batch_size: int = Field(default=1_000, ge=1)
    maintenance_interval_seconds: float = Field(default=5.0, gt=0)
    prune_interval_seconds: float = Field(default=60.0, gt=0)

    # subscriptions (see README "Subscriptions")
    event_poll_seconds: float = Field(default=0.25, gt=0, le=60)
    event_window: int = Field(default=10_000, ge=1)
    key_recheck_seconds: float = Field(default=1.0, gt=0)
    key_cache_seconds: float = Field(default=1.0, ge=0, le=60)
    ws_init_timeout_seconds: float = Field(default=10.0, gt=0)
    ws_ping_interval_seconds: float = Field(default=20.0, gt=0)
    max_subscriptions_per_connection: int = Field(default=50, ge=1)
    max_subscriptions_per_key: int = Field(default=1_000, ge=1)  # on one server
    # long polls: claims with `waitSeconds` one key may have waiting on one server
    max_waiting_claims_per_key: int = Field(default=500, ge=1)

    # slow and numerous clients (see queuelog/edge/serving.py and README "Deployment")
    http_request_timeout_seconds: float = Field(default=30.0, gt=0)
    http_keep_alive_seconds: int = Field(default=5, ge=1)
    http_max_header_bytes: int = Field(default=65_536, ge=1_024)
    max_connections: int = Field(default=4_096, ge=1)
    # Enforce the three bounds above the way uvicorn's settings cannot (queuelog/fences/);
    # false leaves them to uvicorn's own protocol and its public settings.
    bounded_http_protocol: bool = True
    # Hold both WebSocket subprotocols to queuelog's rules (queuelog/edge/websocket.py); false
    # leaves strawberry's own protocol handlers in place.
    strict_websocket: bool = True

    # Serve repeated queries and mutations through the fast path (see docs/performance.md);
    # false serves everything through strawberry's generic path.
    prepared_operations: bool = True

    graphiql: bool = True
    dashboard: bool = True  # the operations dashboard at /dashboard
    introspection: bool = True

    # the GraphQL edge (see SECURITY.md)
    max_depth: int = Field(default=10, ge=1)
    max_aliases: int = Field(default=15, ge=0)
    max_tokens: int = Field(default=2_000, ge=16)
    max_directives: int = Field(default=50, ge=0)
    max_cost: int = Field(default=20_000, ge=1)
    max_anonymous_cost: int = Field(default=8_000, ge=1)  # requests without an API key
    max_response_bytes: int = Field(default=16 * 1024 * 1024, ge=65_536)
    execution_timeout_seconds: float = Field(default=30.0, gt=0)
    rate_limit_per_second: float = Field(default=200.0, ge=0)  # per API key; 0 turns it off
    rate_limit_burst: int = Field(default=400, ge=1)
    auth_failures_per_minute: float = Field(default=10.0, ge=0)  # per client address; 0: off
    auth_failure_burst: int = Field(default=10, ge=1)
    # per client address, for requests that carry no key; 0 turns it off
    anonymous_rate_limit_per_second: float = Field(default=10.0, ge=0)
    anonymous_rate_limit_burst: int = Field(default=60, ge=1)
    field_suggestions: bool = False
    allowed_origins: Annotated[tuple[str, ...], NoDecode] = ()

    # operations (see docs/operations.md)
    metrics_public: bool = False  # GET /metrics without a key, for a private network
    log_format: Literal["text", "json"] = "text"
    otel: bool = False  # OpenTelemetry tracing; needs `pip install queuelog[otel]`
    schedule_interval_seconds: float = Field(default=0.5, gt=0, le=60)

    @field_validator("job_types", mode="before")
    @classmethod
    def _split_types(cls, value: object) -> object:
        if isinstance(value, str):
            return tuple(t.strip() for t in value.split(",") if t.strip())
        return value

    @field_validator("allowed_origins", mode="before")
    @classmethod
    def _split_origins(cls, value: object) -> object:
        if isinstance(value, str):
            return tuple(o.strip() for o in value.split(",") if o.strip())
        return value

    @field_validator("allowed_origins")
    @classmethod
    def _check_origins(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        for origin in value:
            if origin != "*" and not _is_origin(origin):
                raise ValueError(
                    f"invalid origin {origin!r}: expected '*' or an origin such as "
                    "'https://example.com' (scheme, host and port, no path)"
                )
        return value

    @field_validator("job_types")
    @classmethod
    def _check_types(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        if not value:
            raise ValueError("at least one job type must be configured")
        for name in value:
            if not name.isprintable() or len(name) > 64 or " " in name:
                raise ValueError(f"invalid job type name {name!r}")
        return value

    @model_validator(mode="after")
    def _types_from_file(self) -> Settings:
        """`job_types` of the TOML file, where QUEUELOG_JOB_TYPES is not set: the server's
        job types only ever come from its configuration, never from a caller."""
        if self.config is None or "job_types" in self.model_fields_set:
            return self
        try:
            raw = tomllib.loads(self.config.read_text())
        except (OSError, tomllib.TOMLDecodeError) as exc:
            raise ValueError(f"QUEUELOG_CONFIG: cannot read {self.config}: {exc}") from None
        if "job_types" in raw:
            value = raw["job_types"]
            if not isinstance(value, list) or not all(isinstance(t, str) for t in value):
                raise ValueError(f"{self.config}: job_types must be a list of job type names")
            self.job_types = self._check_types(tuple(dict.fromkeys(value)))
        return self

    @field_validator("admin_key", mode="before")
    @classmethod
    def _check_admin_key(cls, value: object) -> object:
        if value in (None, ""):
            return None
        # The shapes a bearer key may have; any other would be stored and never work.
        if isinstance(value, str) and (
            (value.startswith(PREFIX) and well_formed(value))
            or re.fullmatch(r"ql_[A-Za-z0-9_\-]{29,253}", value)
        ):
            return value
        raise ValueError(
            "QUEUELOG_ADMIN_KEY must be a queuelog key: 'qlk_' and 49 letters and digits with"
            " a valid checksum, as `python -c 'from queuelog.domain.key_format import"
            " generate_secret; print(generate_secret())'` prints (or a key of the earlier"
            " format: 'ql_' and then 29 to 253 letters, digits, '-' or '_')"
        )

    def schedule_configs(self) -> dict[str, ScheduleConfig]:
        """The `[schedules.<name>]` tables of the TOML file: created on start where no
        schedule of that name exists (changes made through the API are kept)."""
        if self.config is None:
            return {}
        raw = tomllib.loads(self.config.read_text())
        return {n: ScheduleConfig.model_validate(t) for n, t in raw.get("schedules", {}).items()}

    def type_configs(self) -> dict[str, JobTypeConfig]:
        """The configured job types with their defaults, the TOML file's overriding the server's."""
        overrides: dict[str, TypeDefaults] = {}
        if self.config is not None:
            raw = tomllib.loads(self.config.read_text())
            for name, table in raw.get("types", {}).items():
                if name not in self.job_types:
                    raise ValueError(
                        f"{self.config}: [types.{name}] is not a configured job type (the "
                        f"job types, from QUEUELOG_JOB_TYPES or job_types in this file: "
                        f"{','.join(self.job_types)})"
                    )
                overrides[name] = TypeDefaults.model_validate(table)
        configs = {}
        for name in self.job_types:
            o = overrides.get(name, TypeDefaults())
            configs[name] = JobTypeConfig(
                name=name,
                lease_seconds=o.lease_seconds or self.default_lease_seconds,
                backoff_base_seconds=(
                    self.backoff_base_seconds
                    if o.backoff_base_seconds is None
                    else o.backoff_base_seconds
                ),
                backoff_max_seconds=(
                    self.backoff_max_seconds
                    if o.backoff_max_seconds is None
                    else o.backoff_max_seconds
                ),
                max_running=o.max_running,
                max_running_per_key=o.max_running_per_key,
                max_starts_per_second=o.max_starts_per_second,
                paused=o.paused,
            )
        return configs
