"""SQL types of the logical plan, with DuckDB's rules for the result type of an operation.

A type is a value (:class:`SQLType`): its ``kind`` and, for DECIMAL, precision and scale.
Integers carry their width (TINYINT .. BIGINT, HUGEINT for sums of BIGINT as DuckDB), so
the physical layer can detect overflow instead of wrapping. Numbers promote in one order
(integer < DECIMAL < DOUBLE); a DECIMAL meets an integer as a DECIMAL wide enough for it.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = [
    "SQLType", "BOOLEAN", "TINYINT", "SMALLINT", "INTEGER", "BIGINT", "HUGEINT", "DOUBLE",
    "DATE", "TIMESTAMP", "INTERVAL", "VARCHAR", "NULLTYPE", "decimal", "common_type",
    "sum_type", "arithmetic_type", "MAX_DECIMAL_PRECISION",
]

MAX_DECIMAL_PRECISION = 38  # DuckDB's widest DECIMAL (a 128-bit scaled integer)
_INT_DIGITS = {8: 3, 16: 5, 32: 10, 64: 19, 128: 38}  # decimal digits an integer width needs


@dataclass(frozen=True)
class SQLType:
    """A SQL type.

    Attributes
    ----------
    kind : str
        ``"boolean"``, ``"integer"``, ``"decimal"``, ``"double"``, ``"date"``,
        ``"timestamp"``, ``"interval"``, ``"varchar"`` or ``"null"`` (the type of a bare NULL,
        which takes the type of whatever it meets).
    bits : int
        An integer's width (8, 16, 32, 64, 128); 0 otherwise.
    precision, scale : int
        A DECIMAL's digits in all and after the point; 0 otherwise.
    """

    kind: str
    bits: int = 0
    precision: int = 0
    scale: int = 0

    def __str__(self) -> str:
        if self.kind == "integer":
            return {8: "TINYINT", 16: "SMALLINT", 32: "INTEGER", 64: "BIGINT",
                    128: "HUGEINT"}[self.bits]  # fmt: skip
        if self.kind == "decimal":
            return f"DECIMAL({self.precision},{self.scale})"
        return "NULL" if self.kind == "null" else self.kind.upper()

    @property
    def numeric(self) -> bool:
        return self.kind in ("integer", "decimal", "double")

    @property
    def temporal(self) -> bool:
        return self.kind in ("date", "timestamp")

    def digits(self) -> int:
        """Decimal digits before the point this type can hold (integers: their width's)."""
        if self.kind == "integer":
            return _INT_DIGITS[self.bits]
        if self.kind == "decimal":
            return self.precision - self.scale
        raise TypeError(f"{self} has no digit count")


BOOLEAN = SQLType("boolean")
TINYINT = SQLType("integer", 8)
SMALLINT = SQLType("integer", 16)
INTEGER = SQLType("integer", 32)
BIGINT = SQLType("integer", 64)
HUGEINT = SQLType("integer", 128)
DOUBLE = SQLType("double")
DATE = SQLType("date")
TIMESTAMP = SQLType("timestamp")
INTERVAL = SQLType("interval")
VARCHAR = SQLType("varchar")
NULLTYPE = SQLType("null")


def decimal(precision: int, scale: int) -> SQLType:
    """DECIMAL(precision, scale), checked as DuckDB does (1 <= precision <= 38,
    0 <= scale <= precision)."""
    if not 1 <= precision <= MAX_DECIMAL_PRECISION or not 0 <= scale <= precision:
        raise ValueError(f"DECIMAL({precision},{scale}): need 1 <= precision <= 38 and "
                         "0 <= scale <= precision")
    return SQLType("decimal", precision=precision, scale=scale)


def _as_decimal(t: SQLType) -> SQLType:
    return t if t.kind == "decimal" else decimal(t.digits(), 0)


def common_type(a: SQLType, b: SQLType) -> SQLType | None:
    """The type both ``a`` and ``b`` convert to implicitly (a comparison's, a CASE's, a
    COALESCE's, a UNION column's), or None when there is none (a string and a number)."""
    if a.kind == "null":
        return b
    if b.kind == "null" or a == b:
        return a
    if a.numeric and b.numeric:
        if "double" in (a.kind, b.kind):
            return DOUBLE
        if a.kind == b.kind == "integer":
            return a if a.bits >= b.bits else b
        da, db = _as_decimal(a), _as_decimal(b)
        scale = max(da.scale, db.scale)
        whole = max(da.precision - da.scale, db.precision - db.scale)
        return decimal(min(whole + scale, MAX_DECIMAL_PRECISION), scale)
    if {a.kind, b.kind} == {"date", "timestamp"}:
        return TIMESTAMP
    return None


def sum_type(t: SQLType) -> SQLType:
    """SUM's result type as DuckDB: HUGEINT over integers, DECIMAL(38, s) over DECIMAL(p, s),
    DOUBLE over DOUBLE."""
    if t.kind == "integer":
        return HUGEINT
    if t.kind == "decimal":
        return decimal(MAX_DECIMAL_PRECISION, t.scale)
    return DOUBLE


def arithmetic_type(op: str, a: SQLType, b: SQLType) -> SQLType | None:
    """The result type of ``a op b`` for ``op`` in ``+ - * / // %`` over numbers, or None
    when there is none. DuckDB's rules: ``/`` is DOUBLE division; a DECIMAL sum or difference
    keeps the larger scale with one more whole digit; a product adds precisions and scales,
    capped at 18 digits when both operands fit 64 bits (the result is checked for overflow)
    and at 38 otherwise; integers meet decimals as DECIMAL(digits of their width, 0)."""
    t = common_type(a, b)
    if t is None or not t.numeric:
        return None
    if op == "/" or (op == "//" and t.kind == "decimal"):
        return DOUBLE
    if t.kind != "decimal":
        return t
    da, db = _as_decimal(a), _as_decimal(b)
    if op == "*":
        precision, scale = da.precision + db.precision, da.scale + db.scale
        if scale > MAX_DECIMAL_PRECISION:
            return None
        if precision > 18 and da.precision <= 18 and db.precision <= 18:
            precision = 18  # both fit 64 bits: DuckDB keeps 64 bits and checks for overflow
    elif op in ("+", "-"):
        scale = max(da.scale, db.scale)
        precision = max(da.precision - da.scale, db.precision - db.scale) + scale + 1
    else:  # %: DuckDB computes it on the common decimal type
        return t
    precision = max(min(precision, MAX_DECIMAL_PRECISION), scale)
    return decimal(precision, scale)
