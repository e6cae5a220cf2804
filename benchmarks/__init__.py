"""Speed and memory targets for glm-kv, run by hand or by CI as a report (never as unit tests)."""
