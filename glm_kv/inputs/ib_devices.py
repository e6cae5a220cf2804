"""``--disaggregation-ib-device`` (issue 30): what SGLang 0.5.23 checks at start-up, and what glm-kv can check.

With the Mooncake transfer backend (the default) on a prefill or decode server, SGLang validates the devices
while resolving its arguments (arg_groups/pd_disaggregation_hook.py -> arg_groups/validation_hook.py
``validate_ib_devices``): an empty value is refused; then it lists ``/sys/class/infiniband`` on the machine it
starts on ("InfiniBand sysfs path not found: ..." where the directory is missing, "No IB devices found in ..."
where it is empty); then it parses the value (a device list, a per-GPU JSON mapping or a JSON file,
``parse_ib_device_config``) and refuses devices that are not in that directory.

The sysfs listing, a JSON file's existence and the device names are facts of the machine SGLang starts on,
not of the launch: glm-kv plans for that machine (run anywhere, e.g. a laptop without InfiniBand, where SGLang
itself would refuse) and says in a plan note that SGLang checks them there. What no machine changes, an
empty value, an inline JSON mapping SGLang cannot parse, an empty device group, is refused here in SGLang's
words (tests/sglang/test_flags_ib_device.py runs SGLang's own function over a fake sysfs directory).
"""
from __future__ import annotations

import json

from ..errors import ProfileError

FLAG = "--disaggregation-ib-device"
WHERE = "arg_groups/validation_hook.py validate_ib_devices"
SYSFS = "/sys/class/infiniband"
NOTE = ("--disaggregation-ib-device {value}: SGLang 0.5.23 checks these InfiniBand devices at start-up on the "
        "machine it runs on (Mooncake transfer on a prefill / decode server: arg_groups/validation_hook.py "
        "validate_ib_devices lists " + SYSFS + " and refuses to start where it is missing, empty, or lacks a "
        "named device{file}); glm-kv plans for that machine and cannot see it, so make sure they exist there. "
        "No pool moves with it.")


def _refuse(says: str) -> ProfileError:
    return ProfileError(FLAG, f"SGLang 0.5.23 refuses it at start-up: \"{says}\" ({WHERE})")


def _groups(value: str) -> list[tuple[str, str]]:
    """``parse_ib_device_config`` on an inline value: (context, device list) per group, as SGLang names them."""
    if value.endswith(".json") or not value.startswith("{"):
        return [("all GPUs", value)] if not value.endswith(".json") else []   # a file: read on that machine
    try:
        mapping = json.loads(value)
    except ValueError:
        raise _refuse(f"Invalid JSON mapping: {value}") from None
    if not isinstance(mapping, dict):
        raise _refuse("Invalid format: expected a mapping from GPU id to IB device string")
    out = []
    for key, devices in mapping.items():
        if not str(key).isdigit() or not isinstance(devices, str):
            raise _refuse("Invalid format: keys must be integers (or string representations of integers) and "
                          "values must be strings")
        out.append((f"GPU {int(key)}", devices.strip()))
    if not out:
        raise _refuse("No valid GPU mappings found in JSON")
    return out


def check_ib_devices(value: str) -> str:
    """The value's checks that hold on every machine, in SGLang's words; returns the plan note for the rest."""
    text = value.strip()
    if not text:
        raise _refuse("No valid IB devices specified")
    for context, devices in _groups(text):
        if not [d for d in devices.split(",") if d.strip()]:
            raise _refuse(f"No valid IB devices specified for {context}")
    return NOTE.format(value=text, file=", or where the JSON file named is not there" if text.endswith(".json") else "")


def validated_at_startup(mode: str | None, transfer_backend: str | None, encoder_backend: str | None) -> bool:
    """Whether SGLang validates the devices at start-up: Mooncake PD transfer (``--disaggregation-transfer-backend``
    default mooncake; mooncake_tcp drops the devices) with --disaggregation-mode prefill / decode, or Mooncake
    encoder transfer (``handle_encoder_disaggregation``)."""
    pd = (transfer_backend or "mooncake") == "mooncake" and mode in ("prefill", "decode")
    return pd or encoder_backend == "mooncake"
