"""What every settings model shares: ``SettingsError``, ``@settings_model`` (a frozen pydantic
dataclass, validated when built, replaced or loaded), the field types with their messages, and
the one conversion of pydantic's ``ValidationError`` into a ``SettingsError``.

Loading a file passes the validation context ``{"base": <the file's folder>}``: validators
that resolve relative folders, fill a file's omitted keys or refuse keys that only exist in
Python act only then (``info.context is not None``). Validators raise ``SettingsError``, whose
``key``, if any, is relative to where they run (``"[2]"`` in a list, ``"slug"`` in a model).
"""

import dataclasses
import difflib
import os
import re
from collections.abc import Callable, Mapping
from datetime import date, time
from typing import Annotated, Any, TypeVar, get_args

from pydantic import (
    AfterValidator,
    ConfigDict,
    Field,
    PlainValidator,
    Strict,
    ValidationError,
    ValidationInfo,
    model_validator,
)
from pydantic.dataclasses import dataclass as pydantic_dataclass
from pydantic_core import PydanticCustomError

from datalake_assets.spec import azure_uri

ENV_HOME = "DATALAKE_HOME"
T = TypeVar("T", bound=type)
M = TypeVar("M")


class SettingsError(ValueError):
    """Invalid or unreadable settings.

    ``str(e)`` reads ``<origin>: <key path>: <problem>``, e.g.
    ``settings file /srv/lake.toml: sources[1].date_layout: unknown date layout 'weekly'; ...``.
    ``origin`` is ``settings file <path>``, ``environment`` or ``built-in defaults`` (``None``
    for a model built directly); ``key`` the key path (or environment variable), if any.
    """

    def __init__(self, problem: str, *, key: str | None = None, origin: str | None = None):
        self.problem = problem
        self.key = key
        self.origin = origin
        super().__init__(": ".join(p for p in (origin, key, problem) if p))


def type_name(value: Any) -> str:
    for kind, name in (
        (bool, "boolean"),
        (int, "integer"),
        (float, "float"),
        (str, "string"),
        (Mapping, "table"),
        ((list, tuple), "array"),
        ((date, time), "date/time"),
    ):
        if isinstance(value, kind):
            return name
    return type(value).__name__


def got(value: Any) -> str:
    return f"got {type_name(value)} {value!r}"


_BARE_KEY_RE = re.compile(r"[A-Za-z0-9_-]+")


def key_of(name: Any) -> str:
    """A TOML key as written in a key path: bare if it can be, else quoted."""
    if not isinstance(name, str):
        return f"[{name!r}]"
    return name if _BARE_KEY_RE.fullmatch(name) else '"' + name.replace('"', '\\"') + '"'


def join_key(prefix: str, sub: str | None) -> str | None:
    if not sub:
        return prefix or None
    return sub if not prefix else prefix + sub if sub.startswith("[") else f"{prefix}.{sub}"


def _path(loc: tuple[Any, ...]) -> str:
    out = ""
    for part in loc:
        out = join_key(out, f"[{part}]" if isinstance(part, int) else key_of(part)) or ""
    return out


# ------------------------------------------------------------------------------- the models

CONFIG = ConfigDict(
    extra="forbid", validate_by_name=True, validate_by_alias=True, hide_input_in_errors=True
)


def _hashable(value: Any) -> Any:
    return tuple(sorted(value.items())) if isinstance(value, dict) else value


def _hash(self: Any) -> int:  # dict fields (Spark conf) hash by their items
    return hash(tuple(_hashable(getattr(self, f.name)) for f in dataclasses.fields(self)))


def settings_model(cls: T) -> T:
    """A frozen, hashable pydantic dataclass whose constructor (and so ``dataclasses.replace``)
    raises ``SettingsError``, never pydantic's ``ValidationError``. Keyword or positional
    arguments, in the order of the fields."""
    cls = pydantic_dataclass(frozen=True, config=CONFIG)(cls)
    init = cls.__init__

    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        try:
            init(self, *args, **kwargs)
        except ValidationError as e:
            raise settings_error(e, type(self), top=type(self).__name__) from None

    cls.__init__ = __init__  # type: ignore[misc]
    cls.__hash__ = _hash  # type: ignore[assignment]
    return cls


def load_model(cls: type[M], data: Mapping[str, Any], base: str) -> M:
    """``cls`` from a settings file's table: keys as written (``conf``, never ``extra_conf``),
    relative folders against ``base``."""
    try:
        return cls.__pydantic_validator__.validate_python(  # type: ignore[attr-defined]
            data, context={"base": base}, by_alias=True, by_name=False
        )
    except ValidationError as e:
        raise settings_error(e, cls) from None


def file_defaults(**defaults: Any) -> Any:
    """A model validator: keys a settings file omits take these values, validated (and
    resolved against the file's folder) like written ones. Assign it in the class body."""

    def fill(cls: type, data: Any, info: ValidationInfo) -> Any:
        if info.context is not None and isinstance(data, dict):
            return {**defaults, **data}
        return data

    return model_validator(mode="before")(classmethod(fill))  # type: ignore[arg-type]


def _not_in_file(value: Any, info: ValidationInfo) -> Any:
    if info.context is not None:
        raise PydanticCustomError("unexpected_keyword_argument", "Unexpected keyword argument")
    if value is not None and not isinstance(value, str):
        raise SettingsError(f"must be a string or None, {got(value)}")
    return value


# A field set by the loader, never by the file (LakeSettings.settings_file).
NotInFile = Annotated[str | None, PlainValidator(_not_in_file)]


def _fields(cls: type) -> dict[str, Any]:
    return getattr(cls, "__pydantic_fields__", {})


def file_keys(cls: type) -> tuple[str, ...]:
    """The keys of ``cls``'s table in a settings file."""
    return tuple(
        f.alias or name
        for name, f in _fields(cls).items()
        if not any(getattr(m, "func", None) is _not_in_file for m in f.metadata)
    )


def _field(cls: type, name: Any) -> Any:
    return next((f for n, f in _fields(cls).items() if name in (n, f.alias)), None)


def _model_at(cls: type, loc: tuple[Any, ...]) -> type:
    for part in loc:
        f = _field(cls, part)
        if f is not None:
            cls = next((t for t in (f.annotation, *get_args(f.annotation)) if _fields(t)), cls)
    return cls


# ------------------------------------------------------------------------- ValidationError


def _unknown_keys(unknown: list[str], allowed: tuple[str, ...], place: str) -> str:
    shown = ", ".join(repr(k) for k in unknown)
    hints = [m for k in unknown for m in difflib.get_close_matches(k, allowed, n=1)]
    hint = f" (did you mean {', '.join(repr(h) for h in hints)}?)" if hints else ""
    return (
        f"unknown key{'s' if len(unknown) > 1 else ''} {shown} in {place}{hint}; "
        f"allowed keys: {', '.join(sorted(allowed))}"
    )


def settings_error(exc: ValidationError, cls: type, top: str = "the top level") -> SettingsError:
    """The first of pydantic's errors (unknown keys first: a typo explains the rest) as one
    ``SettingsError`` naming the key path, the bad value and what is allowed."""
    errors = sorted(exc.errors(), key=lambda e: e["type"] != "unexpected_keyword_argument")
    e = errors[0]
    kind, loc, value = e["type"], tuple(e["loc"]), e.get("input")
    if loc and isinstance(loc[0], int) and loc[0] < len(_fields(cls)):  # a positional argument
        loc = (list(_fields(cls))[loc[0]], *loc[1:])
    key = _path(loc)
    if kind == "unexpected_keyword_argument":
        unknown = [x["loc"][-1] for x in errors if x["type"] == kind and x["loc"][:-1] == loc[:-1]]
        where = _path(loc[:-1])
        place = (where if where.endswith("]") else f"[{where}]") if where else top
        return SettingsError(
            _unknown_keys(unknown, file_keys(_model_at(cls, loc[:-1])), place), key=key
        )
    error = (e.get("ctx") or {}).get("error")
    if isinstance(error, SettingsError):
        return SettingsError(error.problem, key=join_key(key, error.key))
    field = _field(_model_at(cls, loc[:-1]), loc[-1]) if loc else None
    if kind in ("missing", "missing_argument"):
        about = f" ({field.description})" if field is not None and field.description else ""
        problem = f"missing required key {loc[-1]!r}{about}"
    elif kind in ("int_type", "greater_than_equal", "less_than_equal") and field is not None:
        lo, hi = (
            next((getattr(m, b) for m in field.metadata if hasattr(m, b)), None)
            for b in ("ge", "le")
        )
        allowed = f"an integer >= {lo}" if hi is None else f"an integer from {lo} to {hi}"
        problem = f"must be {allowed}, {got(value) if kind == 'int_type' else f'got {value!r}'}"
    elif kind == "string_type":
        quote = " (quote it: TOML dates are not accepted)" * isinstance(value, (date, time))
        problem = f"must be a string{quote}, {got(value)}"
    elif kind == "bool_type":
        problem = f"must be true or false, {got(value)}"
    elif kind in ("dataclass_type", "dict_type"):
        table = re.sub(r"\[\d+\]", "", key)
        shown = f"[[{table}]]" if loc and isinstance(loc[-1], int) else f"[{table}]"
        problem = f"must be a table ({shown}), {got(value)}"
    elif kind in ("tuple_type", "list_type"):
        problem = f"must be an array, {got(value)}"
    else:
        problem = str(error) if isinstance(error, ValueError) else e["msg"]
    return SettingsError(problem, key=key or None)


# ------------------------------------------------------------------------------ field types

Str = Annotated[str, Strict()]
Bool = Annotated[bool, Strict()]


def Int(lo: int, hi: int | None = None) -> Any:  # noqa: N802 (a type)
    """An integer from ``lo`` to ``hi`` (no booleans, no strings)."""
    return Annotated[int, Strict(), Field(ge=lo, le=hi)]


def Match(pattern: str, what: str, rule: str, *, empty: bool | str = False) -> Any:  # noqa: N802
    """A string matching ``pattern``. ``empty=True``: or ``""``; ``empty="<the default>"``: or
    ``""`` when built directly (a derived value), which a file omits instead."""
    compiled = re.compile(pattern)

    def check(value: str, info: ValidationInfo) -> str:
        if not value and isinstance(empty, str) and info.context is not None:
            raise SettingsError(f"must not be empty; omit it to default to {empty}")
        if (value or not empty) and not compiled.fullmatch(value):
            raise SettingsError(
                f"invalid {what} {value!r}; allowed: {rule}"
                + (", or empty" if empty is True else "")
            )
        return value

    return Annotated[str, Strict(), AfterValidator(check)]


# AWS values several sections hold ([catalog]'s and [iceberg]'s Glue keys, [compute]'s)
REGION_RE = r"[a-z]{2}(?:-[a-z]+)+-[0-9]{1,2}"
ENDPOINT_RE = r"https?://[^\s'\"\\;`]+"


def AwsRegion(what: str) -> Any:  # noqa: N802 (a type)
    """An AWS region, or ``""`` (the SDK's default: ``AWS_REGION``, ``~/.aws/config``)."""
    return Match(REGION_RE, what, "an AWS region such as 'us-east-1'", empty=True)


def HttpUrl(what: str) -> Any:  # noqa: N802 (a type)
    """An http(s) endpoint (a VPC endpoint, a test server), or ``""``."""
    return Match(ENDPOINT_RE, what, "an http:// or https:// URL", empty=True)


def AwsAccountId(what: str) -> Any:  # noqa: N802 (a type)
    """A 12-digit AWS account id, or ``""`` (the caller's account)."""
    return Match(r"[0-9]{12}", what, "a 12-digit AWS account id", empty=True)


def string_array(value: Any, what: str, pattern: re.Pattern[str], invalid: str) -> tuple[str, ...]:
    """``value``, an array of strings each matching ``pattern``, as a tuple. ``what`` names the
    items (``"trait names"``); ``invalid`` is the error of an item that does not match, which
    names its position, never its value."""
    if isinstance(value, str) or not isinstance(value, (list, tuple)):
        raise SettingsError(f"must be an array of {what}, got {type_name(value)}")
    for i, item in enumerate(value):
        if not isinstance(item, str) or not pattern.fullmatch(item):
            raise SettingsError(invalid, key=f"[{i}]")
    return tuple(value)


def OneOf(choices: tuple[str, ...], what: str, allowed: str | None = None) -> Any:  # noqa: N802
    def check(value: str) -> str:
        if value not in choices:
            if allowed:
                raise SettingsError(f"invalid {what} {value!r}; allowed: {allowed}")
            raise SettingsError(
                f"unknown {what} {value!r}; choose one of {', '.join(repr(c) for c in choices)}"
            )
        return value

    return Annotated[str, Strict(), AfterValidator(check)]


def base_of(info: ValidationInfo) -> str | None:
    """The settings file's folder when loading (relative folders resolve against it)."""
    return info.context.get("base") if info.context is not None else None


URI_RE = re.compile(r"([A-Za-z][A-Za-z0-9+.\-]*)://(.*)", re.DOTALL)
HALF_URI_RE = re.compile(r"[A-Za-z][A-Za-z0-9+.\-]+:/")  # "s3:/bucket": a URI missing a '/'


def resolve_root(root: str, base: str) -> str:
    """A local folder (absolute, against ``base``, ``~`` expanded) or a URI (as written,
    minus trailing ``/``)."""
    if not root.strip():
        raise SettingsError("must not be empty; allowed: a local folder or a URI")
    if root != root.strip():
        raise SettingsError(f"has leading or trailing spaces: {root!r}")
    if "://" in root:
        m = URI_RE.fullmatch(root)
        rest = m.group(2).rstrip("/") if m else ""
        if not m or not rest:
            raise SettingsError(
                f"invalid URI {root!r}; allowed: scheme://bucket/prefix (e.g. "
                "s3://my-lake/data) or a local folder"
            )
        check_azure_uri(f"{m.group(1)}://{rest}")
        return f"{m.group(1)}://{rest}"
    if HALF_URI_RE.match(root):
        raise SettingsError(
            f"{root!r} looks like a URI missing a '/' (write scheme://bucket/prefix)"
        )
    return os.path.normpath(os.path.join(base, os.path.expanduser(root)))


def check_azure_uri(uri: str) -> None:
    """Azure URIs (and the spellings of Azure that are refused) follow Azure's rules; other
    schemes pass (``s3://``)."""
    scheme = azure_uri.scheme_of(uri)
    if scheme in azure_uri.AZURE_SCHEMES or scheme in azure_uri.OTHER_AZURE_SCHEMES:
        try:
            azure_uri.parse(uri)
        except ValueError as e:
            shown = uri.split("?", 1)[0] + ("?<redacted>" if "?" in uri else "")  # a SAS token
            raise SettingsError(f"invalid Azure URI {shown!r}: {e}") from None


def _root(value: str, info: ValidationInfo) -> str:
    base = base_of(info)
    if base is not None:
        return resolve_root(value, base)
    if not value.strip():
        raise SettingsError("must not be empty")
    return value


# A root folder (archive_root, lake_root): resolved when loaded, kept as given when built.
Root = Annotated[str, Strict(), AfterValidator(_root)]


def _local_file(value: str, info: ValidationInfo) -> str:
    base = base_of(info)
    if not value:
        return value
    if "://" in value:
        raise SettingsError(f"must be a local file, got {value!r}")
    return os.path.normpath(os.path.join(base, os.path.expanduser(value))) if base else value


# A local file or folder, optional (""): from a file resolved relative to its folder, like the
# roots; built directly, kept as given.
LocalFile = Annotated[str, Strict(), AfterValidator(_local_file)]


def LocalFolder(default: str, why: str, hint: str = "") -> Any:  # noqa: N802
    """A local folder; from a file resolved like the roots (omitted: ``<folder>/<default>``,
    see ``file_defaults``); built directly, ``""`` means ``<home>/<default>`` when used."""

    def check(value: str, info: ValidationInfo) -> str:
        base = base_of(info)
        if base is not None and not value.strip():
            raise SettingsError(f"must not be empty; omit it for the default ({default})")
        if "://" in value:
            raise SettingsError(f"must be a local folder ({why}), got {value!r}{hint}")
        if base is not None:
            value = os.path.normpath(os.path.join(base, os.path.expanduser(value)))
        return value

    return Annotated[str, Strict(), AfterValidator(check)]


def SparkConf(
    owned: Mapping[str, str],  # noqa: N802
    defaults: Callable[[], dict[str, str]] | None = None,
) -> Any:
    """A table of ``spark.*`` name -> string value; ``owned`` names map to why they are not
    allowed. From a file, TOML booleans and integers become Spark's strings and the table is
    added to ``defaults()``. A private copy either way."""

    def check(conf: Any, info: ValidationInfo) -> dict[str, str]:
        if not isinstance(conf, Mapping):
            raise SettingsError(f"must be a table of Spark settings, {got(conf)}")
        out: dict[str, str] = {}
        for name, value in conf.items():
            k = key_of(name)
            if isinstance(value, Mapping):
                raise SettingsError(
                    "a table where a value was expected: quote Spark keys, e.g. "
                    '"spark.sql.files.maxPartitionBytes" = "64m"',
                    key=k,
                )
            if not isinstance(name, str) or not name.startswith("spark.") or name == "spark.":
                raise SettingsError(
                    f"invalid Spark setting name {name!r}; allowed: any key starting with 'spark.'",
                    key=k,
                )
            if name in owned:
                raise SettingsError(f"{name!r} {owned[name]}", key=k)
            if info.context is not None and isinstance(value, bool):
                value = "true" if value else "false"
            elif info.context is not None and isinstance(value, int):
                value = str(value)
            if not isinstance(value, str):
                raise SettingsError(f"Spark setting values must be strings, {got(value)}", key=k)
            out[name] = value
        return {**defaults(), **out} if defaults and info.context is not None else out

    return Annotated[dict[str, str], PlainValidator(check)]


def default_home(env: Mapping[str, str] | None = None) -> str:
    """``$DATALAKE_HOME`` (absolute, ``~`` expanded), else ``<cwd>/.datalake``. Local only."""
    env = os.environ if env is None else env
    home = env.get(ENV_HOME)
    if not home:
        return os.path.join(os.getcwd(), ".datalake")
    if "://" in home:
        raise SettingsError(
            f"must be a local folder, got {home!r}; set DATALAKE_ARCHIVE_ROOT and "
            "DATALAKE_LAKE_ROOT for URIs",
            key=ENV_HOME,
            origin="environment",
        )
    return os.path.abspath(os.path.expanduser(home))
