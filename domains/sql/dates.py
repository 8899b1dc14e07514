"""Calendar arithmetic on int32 day numbers (days since 1970-01-01), in integer operations
only, so the same code runs on NumPy and CuPy arrays (CuPy has no ``datetime64``) and on
scalars. The proleptic Gregorian calendar, as SQL's DATE; the civil-from-days conversion is
the era-based one (400-year eras of 146097 days), exact for every int32 day."""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["DAY_US", "civil_from_days", "days_from_civil", "shift_months", "shift_micros"]

_DAYS_PER_ERA = 146097  # days in 400 Gregorian years
DAY_US = 86_400_000_000  # microseconds per day


def civil_from_days(days: Any) -> tuple[Any, Any, Any]:
    """``(year, month, day)`` (int64, month and day from 1) of day numbers ``days``."""
    z = days.astype(np.int64) + 719468 if hasattr(days, "astype") else np.int64(days) + 719468
    era = z // _DAYS_PER_ERA  # floor division: correct before 0000-03-01 too
    doe = z - era * _DAYS_PER_ERA  # day of the era, [0, 146096]
    yoe = (doe - doe // 1460 + doe // 36524 - doe // 146096) // 365  # year of the era
    doy = doe - (365 * yoe + yoe // 4 - yoe // 100)  # day of the year from March 1st
    mp = (5 * doy + 2) // 153  # month from March, [0, 11]
    day = doy - (153 * mp + 2) // 5 + 1
    month = mp + 3 - 12 * (mp >= 10)
    year = yoe + era * 400 + (month <= 2)
    return year, month, day


def days_from_civil(year: Any, month: Any, day: Any) -> Any:
    """Day numbers (int64) of dates ``(year, month, day)``; the inverse of
    :func:`civil_from_days` for valid dates."""
    y = year - (month <= 2)
    era = y // 400
    yoe = y - era * 400
    mp = month + 12 * (month <= 2) - 3  # month from March, [0, 11]
    doy = (153 * mp + 2) // 5 + day - 1
    doe = yoe * 365 + yoe // 4 - yoe // 100 + doy
    return era * _DAYS_PER_ERA + doe - 719468


def _month_length(year: Any, month: Any) -> Any:
    leap = ((year % 4 == 0) & (year % 100 != 0)) | (year % 400 == 0)
    # 31 28 31 30 31 30 31 31 30 31 30 31: 30 or 31 by the month's parity flip at August
    base = 30 + ((month + (month >= 8)) % 2)
    return base - (month == 2) * (2 - leap)


def shift_months(days: Any, months: int) -> Any:
    """Day numbers moved by ``months`` calendar months; a day past the target month's end
    clips to its last day (``2024-01-31 + 1 month`` is ``2024-02-29``), as SQL's does."""
    year, month, day = civil_from_days(days)
    total = year * 12 + (month - 1) + months
    y2, m2 = total // 12, total % 12 + 1
    length = _month_length(y2, m2)
    d2 = day + (length - day) * (day > length)  # min(day, length), scalar- and array-safe
    return days_from_civil(y2, m2, d2)


def shift_micros(us: Any, months: int, days: int, micros: int) -> Any:
    """Instants in microseconds since 1970 moved by an interval: its months first (a day past
    the month's end clips to it), then its days, then its microseconds, as DuckDB."""
    day = us // DAY_US
    clock = us - day * DAY_US
    if months:
        day = shift_months(day, months)
    return (day + days) * DAY_US + clock + micros
