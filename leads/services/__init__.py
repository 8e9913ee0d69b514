"""The leads overlay's verbs (interfaces.md `leads.services`), one module per concern:

- `vocabulary`: the closed predicate vocabulary, its validator and matching;
- `rules`: `create_rule`, `update_rule`, `delete_rule`;
- `requests`: the core hook `registrations_changed`, `generate_leads`, `relink`;
- `values`: lead values and description;
- `passes`: `run_pass` and its `PassReport` (leased claims, fenced batches).
"""

from leads.services.passes import PassReport, run_pass
from leads.services.requests import generate_leads, registrations_changed, relink
from leads.services.rules import create_rule, delete_rule, predicates_of, update_rule
from leads.services.vocabulary import VOCABULARY, validate_predicates

__all__ = [
    "VOCABULARY",
    "PassReport",
    "create_rule",
    "delete_rule",
    "generate_leads",
    "predicates_of",
    "registrations_changed",
    "relink",
    "run_pass",
    "update_rule",
    "validate_predicates",
]
