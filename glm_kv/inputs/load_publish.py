"""``--load-publish-endpoint`` with ``--kv-events-config`` (issue 30): SGLang 0.5.23's start-up checks, in its words.

Neither flag moves a pool byte (tests/sglang/test_flags_table.py proves the pair inert on every proof
profile); SGLang refuses the launch when the load range cannot be published
(arg_groups/validation_hook.py ``check_load_publish_args``): no KV-events publisher to advertise it through,
an unparseable or inactive ``--kv-events-config``, or what ``resolve_load_pub_range``
(disaggregation/kv_events.py) declines: a non-bindable address, a range overlapping the KV-events or replay
range, one running past port 65535. glm-kv refuses the same launches with the same reason;
tests/sglang/test_flags_load_publish.py runs SGLang's own check on them.
"""
from __future__ import annotations

import ipaddress
import json
from typing import Any

from ..errors import ProfileError

FLAG = "--load-publish-endpoint"
WHERE = "arg_groups/validation_hook.py check_load_publish_args"
BIND_WILDCARD_HOSTS = ("*", "0.0.0.0", "::")   # kv_events._BIND_WILDCARD_HOSTS
PORT_MAX = 65535
# KVEventsConfig's fields (disaggregation/kv_events.py) and their defaults that the check reads
KV_EVENTS_DEFAULTS = {"publisher": "null", "endpoint": "tcp://*:5557", "replay_endpoint": None}
_STR_FIELDS = ("publisher", "endpoint", "topic")
_INT_FIELDS = ("buffer_steps", "hwm", "max_queue_size")
KV_EVENTS_FORMATS = ("default", "dynamo")


def _is_ipv6(host: str) -> bool:
    try:
        ipaddress.IPv6Address(host)
        return True
    except ValueError:
        return False


def _parse_address(addr: str) -> tuple[str, int] | None:
    """``NetworkAddress.parse`` (utils/network.py): ``(host, port)`` of ``host:port`` / ``[v6]:port``, else None
    where SGLang raises (no port, an empty host, a bare IPv6 address, a port that is no integer in 0..65535)."""
    if not addr:
        return None
    if addr.startswith("["):
        close = addr.find("]")
        if close == -1 or not _is_ipv6(addr[1:close]):
            return None
        rest = addr[close + 1:]
        if not rest.startswith(":") or len(rest) < 2:
            return None
        host, port_text = addr[1:close], rest[1:]
    else:
        if ":" not in addr:
            return None
        host, port_text = addr.rsplit(":", 1)
        if not host or (":" in host and _is_ipv6(host)):
            return None
    try:
        port = int(port_text)
    except ValueError:
        return None
    if not 0 <= port <= PORT_MAX:
        return None
    if host.startswith("[") and host.endswith("]"):   # NetworkAddress.__post_init__ strips brackets
        host = host[1:-1]
    return host, port


def _tcp(endpoint: str | None) -> tuple[str, int] | None:
    if not endpoint or not endpoint.startswith("tcp://"):
        return None
    return _parse_address(endpoint[len("tcp://"):])


def tcp_port(endpoint: str | None) -> int | None:
    """``parse_tcp_port``: the legal port (1..65535) of a tcp:// endpoint, any host, else None."""
    addr = _tcp(endpoint)
    return addr[1] if addr is not None and 0 < addr[1] <= PORT_MAX else None


def bindable_tcp(endpoint: str | None) -> tuple[str, int] | None:
    """``parse_bindable_tcp``: ``(host, port)`` where a PUB socket can bind it (a wildcard host), else None."""
    addr = _tcp(endpoint)
    if addr is None or addr[0] not in BIND_WILDCARD_HOSTS or not 0 < addr[1] <= PORT_MAX:
        return None
    return addr


def load_pub_range(kv_endpoint: str | None, replay_endpoint: str | None, dp_size: int,
                   mode: str) -> tuple[tuple[str, int] | None, str | None]:
    """``resolve_load_pub_range``: ``((host, base), None)`` or ``(None, SGLang's reason)``; ``(None, None)`` off."""
    mode = (mode or "").strip()
    if dp_size < 1 or not mode or mode.lower() == "off":
        return None, None
    if mode.lower() == "auto":
        resolved = bindable_tcp(kv_endpoint)
        if resolved is None:
            why = "--kv-events-config is not set" if kv_endpoint is None else f"{kv_endpoint!r} is not one"
            return None, ("--load-publish-endpoint=auto needs a bindable wildcard-host tcp:// --kv-events-config "
                          f"endpoint to pack after; {why}")
        host, kv_base = resolved
        base = kv_base + dp_size
        replay = tcp_port(replay_endpoint)
        if replay is not None and base < replay + dp_size and replay < base + dp_size:
            base = replay + dp_size
    else:
        if tcp_port(kv_endpoint) is None:
            absent = "without --kv-events-config" if kv_endpoint is None else f"for endpoint {kv_endpoint!r}"
            return None, (f"--load-publish-endpoint={mode!r} needs a routable tcp:// --kv-events-config endpoint: "
                          f"routers discover the load range through /server_info's kv_events block, absent {absent}, "
                          "so the socket would be bound but never advertised")
        resolved = bindable_tcp(mode)
        if resolved is None:
            return None, (f"--load-publish-endpoint={mode!r} is not a bindable tcp:// address (a concrete host "
                          "would be connected to, not bound)")
        host, base = resolved
        for port in (tcp_port(kv_endpoint), tcp_port(replay_endpoint)):
            if port is not None and base < port + dp_size and port < base + dp_size:
                return None, (f"--load-publish-endpoint range [{base}, {base + dp_size}) overlaps the kv-events "
                              f"range [{port}, {port + dp_size})")
    if base + dp_size - 1 > PORT_MAX:
        return None, f"load port range from {base} would run past the u16 ceiling"
    return (host, base), None


def kv_events_config(raw: str) -> dict[str, Any]:
    """``KVEventsConfig.from_cli``'s reading of the fields the check uses; None values and types as its pydantic
    model takes them (strings for the endpoints, integers for the buffers, a boolean or null bind, a known
    format); raises ``ValueError`` with the reason where SGLang's model refuses the JSON."""
    try:
        cfg = json.loads(raw)
    except ValueError as e:
        raise ValueError(f"invalid JSON ({e})") from None
    if not isinstance(cfg, dict):
        raise ValueError(f"a JSON object is expected, got {type(cfg).__name__}")
    for key in _STR_FIELDS:
        if key in cfg and not isinstance(cfg[key], str):
            raise ValueError(f"{key}: a string is expected")
    if "replay_endpoint" in cfg and cfg["replay_endpoint"] is not None and not isinstance(cfg["replay_endpoint"], str):
        raise ValueError("replay_endpoint: a string is expected")
    for key in _INT_FIELDS:
        if not _pydantic_int(cfg.get(key, 0)):
            raise ValueError(f"{key}: an integer is expected")
    if cfg.get("bind") is not None and not _pydantic_bool(cfg["bind"]):
        raise ValueError("bind: a boolean is expected")
    if cfg.get("format", "default") not in KV_EVENTS_FORMATS:
        raise ValueError(f"format: one of {KV_EVENTS_FORMATS} is expected")
    return {**KV_EVENTS_DEFAULTS, **{k: cfg[k] for k in KV_EVENTS_DEFAULTS if k in cfg}}


def _pydantic_bool(v: Any) -> bool:
    """What pydantic's lax bool takes: a bool, 0 / 1, or one of its words."""
    if isinstance(v, bool):
        return True
    if isinstance(v, int):
        return v in (0, 1)
    return isinstance(v, str) and v.lower() in ("0", "off", "f", "false", "n", "no", "1", "on", "t", "true", "y", "yes")


def _pydantic_int(v: Any) -> bool:
    """What pydantic's lax int takes from JSON: an integer, a float without a fraction, a numeric string."""
    if isinstance(v, bool):
        return True   # pydantic takes true / false as 1 / 0
    if isinstance(v, int):
        return True
    if isinstance(v, float):
        return v.is_integer()
    if isinstance(v, str):
        try:
            int(v.strip())
            return True
        except ValueError:
            return False
    return False


def check_kv_events_config(kv_events: str | None) -> None:
    """A ``--kv-events-config`` SGLang's ``KVEventsConfig`` refuses: every scheduler reads it at start-up
    (managers/scheduler.py ``uses_dynamo_format`` -> ``KVEventsConfig.from_cli``), so the server does not start."""
    if not kv_events:
        return
    try:
        kv_events_config(kv_events)
    except ValueError as e:
        raise ProfileError("--kv-events-config", f"SGLang 0.5.23 fails at start-up with it: its scheduler reads it with "
                                                 f"KVEventsConfig.from_cli (managers/scheduler.py uses_dynamo_format), "
                                                 f"whose model refuses it: {e}") from None


def check_load_publish(load_publish: str | None, kv_events: str | None, dp_ranks: int) -> None:
    """``check_load_publish_args`` for a launch with ``dp_ranks`` DP ranks (replicas x attention-DP groups):
    nothing when the load range is off; else SGLang's refusal as one line naming the flag. Without it, a
    ``--kv-events-config`` SGLang's scheduler cannot read (``check_kv_events_config``)."""
    mode = (load_publish or "").strip()
    if not mode or mode.lower() == "off":
        check_kv_events_config(kv_events)
        return
    if not kv_events:
        raise ProfileError(FLAG, f"SGLang 0.5.23 refuses it: \"--load-publish-endpoint requires --kv-events-config: "
                                 f"routers discover the load range through /server_info's kv_events block, absent "
                                 f"without a publisher.\" ({WHERE})")
    try:
        cfg = kv_events_config(kv_events)
    except ValueError as e:
        raise ProfileError("--kv-events-config", f"SGLang 0.5.23 refuses it with {FLAG}: \"--kv-events-config is not "
                                                 f"parseable: ...\" (its KVEventsConfig model: {e}; {WHERE})") from None
    if cfg["publisher"] == "null" or not cfg["endpoint"]:
        raise ProfileError(FLAG, "SGLang 0.5.23 refuses it: \"--load-publish-endpoint needs an active "
                                 "--kv-events-config publisher; got publisher='null' or an empty endpoint.\" "
                                 f"({WHERE})")
    _, reason = load_pub_range(cfg["endpoint"], cfg["replay_endpoint"], dp_ranks, mode)
    if reason:
        raise ProfileError(FLAG, f"SGLang 0.5.23 refuses it: \"{reason}\" ({WHERE})")
