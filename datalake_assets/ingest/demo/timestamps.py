"""Timestamps of the demo traffic, from integer microseconds (or milliseconds) since the epoch,
UTC, in the five formats of ``TIMESTAMP_FORMATS``. Hot path: the "YYYY-MM-DDTHH:MM:" prefix of
each minute and the "SS.mmm" text of each millisecond of a minute are looked up, not
formatted."""

from __future__ import annotations

from datetime import date

TIMESTAMP_FORMATS: tuple[str, ...] = (
    "2026-11-21T10:00:00.123Z",
    "2026-11-21T12:00:00.123+02:00",
    "2026-11-21T10:00:00Z",
    "2026-11-21T10:00:00.123456Z",
    "2026-11-21 10:00:00",
)
_F_MS_Z, _F_OFFSET, _F_SEC_Z, _F_US_Z, _F_NAIVE = range(5)

_DAY_US = 86_400_000_000

_EPOCH_ORDINAL = date(1970, 1, 1).toordinal()
_SS = [f"{s:02d}" for s in range(60)]
_SSMMM: list[str] = []  # filled on first use by _tables()
_MIN_T: dict[int, str] = {}  # minute since the epoch -> "YYYY-MM-DDTHH:MM:"
_MIN_SP: dict[int, str] = {}  # minute since the epoch -> "YYYY-MM-DD HH:MM:"
_MIN_CACHE_MAX = 500_000


def _tables() -> None:
    if not _SSMMM:
        _SSMMM.extend([f"{s:02d}.{m:03d}" for s in range(60) for m in range(1000)])


def _min_t(minute: int) -> str:
    if len(_MIN_T) >= _MIN_CACHE_MAX:
        _MIN_T.clear()
    days, m = divmod(minute, 1440)
    s = _MIN_T[minute] = (
        f"{date.fromordinal(_EPOCH_ORDINAL + days).isoformat()}T{m // 60:02d}:{m % 60:02d}:"
    )
    return s


def _min_sp(minute: int) -> str:
    if len(_MIN_SP) >= _MIN_CACHE_MAX:
        _MIN_SP.clear()
    s = _MIN_SP[minute] = (_MIN_T.get(minute) or _min_t(minute)).replace("T", " ")
    return s


def _ms_z(ms: int) -> str:
    """``YYYY-MM-DDTHH:MM:SS.mmmZ``: the strict form used for ``receivedAt``."""
    m, r = divmod(ms, 60_000)
    return f"{_MIN_T.get(m) or _min_t(m)}{_SSMMM[r]}Z"


def _offset_suffix(offset_min: int) -> str:
    s = _SUFFIX.get(offset_min)
    if s is None:
        oh, om = divmod(abs(offset_min), 60)
        s = _SUFFIX[offset_min] = f"{'-' if offset_min < 0 else '+'}{oh:02d}:{om:02d}"
    return s


_SUFFIX: dict[int, str] = {}


def _fmt(us: int, kind: int, offset_min: int) -> str:
    """``us`` in one of the five ``TIMESTAMP_FORMATS`` (``kind``); ``offset_min`` is used by the
    local-time-with-offset form."""
    if kind == _F_OFFSET:
        us += offset_min * 60_000_000
    m, r = divmod(us, 60_000_000)
    if kind == _F_NAIVE:
        return f"{_MIN_SP.get(m) or _min_sp(m)}{_SS[r // 1_000_000]}"
    p = _MIN_T.get(m) or _min_t(m)
    if kind == _F_MS_Z:
        return f"{p}{_SSMMM[r // 1000]}Z"
    if kind == _F_OFFSET:
        return f"{p}{_SSMMM[r // 1000]}{_offset_suffix(offset_min)}"
    if kind == _F_SEC_Z:
        return f"{p}{_SS[r // 1_000_000]}Z"
    return f"{p}{_SSMMM[r // 1000]}{r % 1000:03d}Z"  # _F_US_Z


# Most libraries send the millisecond form; the others are the minority (percent, cumulative).
_FORMAT_TABLE = [_F_MS_Z] * 70 + [_F_OFFSET] * 10 + [_F_SEC_Z] * 8 + [_F_US_Z] * 8 + [_F_NAIVE] * 4


def _pick_format(r: float) -> int:
    return _FORMAT_TABLE[int(r * 100)]
