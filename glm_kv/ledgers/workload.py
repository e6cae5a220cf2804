"""Workloads against the ledgers: what N tokens or R requests cost on a rank."""
from __future__ import annotations

from dataclasses import dataclass

from ..units import requests_per_worker
from .plan import Plan


def token_ledger_bytes(plan: Plan, tokens: int) -> int:
    """The per-token ledger (KV + indexer, as reserved) for ``tokens`` resident tokens."""
    return plan.token.cell_size_bytes * tokens


def kda_ledger_bytes(plan: Plan, requests: int) -> int:
    """The per-request ledger: state slots reserved for ``requests`` concurrent requests."""
    return plan.request.state_bytes_per_request * requests


@dataclass(frozen=True)
class Workload:
    requests_global: int
    requests_per_rank: int
    context_length: int
    token_bytes_per_request: int
    token_bytes_per_rank: int
    token_bytes_global: int
    kda_bytes_per_request: int
    kda_bytes_per_rank: int
    kda_bytes_global: int
    tail_bytes_per_rank: int


def workload(plan: Plan, requests: int | None = None, context_length: int | None = None) -> Workload:
    """R requests of L tokens each, all resident: both ledgers per rank and over all DP workers."""
    reqs = requests if requests is not None else (plan.profile.max_running_requests or 1)
    ctx = context_length if context_length is not None else plan.profile.context_length
    per_rank = requests_per_worker(reqs, plan.parallel.attn_dp_size)
    tok_req = token_ledger_bytes(plan, ctx)
    kda_req = kda_ledger_bytes(plan, 1)
    return Workload(reqs, per_rank, ctx, tok_req, tok_req * per_rank, tok_req * reqs,
                    kda_req, kda_req * per_rank, kda_req * reqs, plan.tail.bytes)


def crossover_context(plan: Plan) -> int:
    """Context length at which one request's token ledger reaches its KDA ledger."""
    per_req = plan.request.state_bytes_per_request
    cell = plan.token.cell_size_bytes
    return -(-per_req // cell)
