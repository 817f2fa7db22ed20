"""What one million tokens of an inference service cost: the ledger's cost of its held slices split between
prompt (input) and completion (output) tokens by the time each phase took (prefill and decode seconds, as
its servers reported them), over the tokens it served. Pure; money is Decimal. These are rates derived from
ledger sums, not ledger lines: they are rounded to RATE_PLACES for showing, never summed."""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal

PER_MILLION = Decimal(1_000_000)
RATE_PLACES = Decimal("0.0001")


@dataclass(frozen=True)
class TokenCosts:
    prompt: Decimal | None  # per 1M prompt tokens; None: no prompt token was served
    completion: Decimal | None  # per 1M completion tokens


def prompt_share(prompt_tokens: int, completion_tokens: int, prefill_s: float, decode_s: float) -> Decimal:
    """The part of the cost the prompt tokens carry: prefill seconds over prefill and decode seconds; by the
    tokens when no phase time is known; all of it on the side with tokens when the other has none."""
    if not completion_tokens:
        return Decimal(1)
    if not prompt_tokens:
        return Decimal(0)
    if prefill_s > 0 or decode_s > 0:
        return Decimal(repr(float(prefill_s))) / (
            Decimal(repr(float(prefill_s))) + Decimal(repr(float(decode_s)))
        )
    return Decimal(prompt_tokens) / Decimal(prompt_tokens + completion_tokens)


def per_million_tokens(
    cost: Decimal | None, prompt_tokens: int, completion_tokens: int, prefill_s: float, decode_s: float
) -> TokenCosts:
    """The cost of 1M prompt and of 1M completion tokens, from `cost` (the ledger's, of the held slices) and
    what was served for it."""
    if cost is None or not (prompt_tokens or completion_tokens):
        return TokenCosts(None, None)
    share = prompt_share(prompt_tokens, completion_tokens, prefill_s, decode_s)

    def rate(part: Decimal, tokens: int) -> Decimal | None:
        return (part * PER_MILLION / tokens).quantize(RATE_PLACES) if tokens else None

    return TokenCosts(rate(cost * share, prompt_tokens), rate(cost * (1 - share), completion_tokens))
