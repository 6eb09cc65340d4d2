"""Audited epsilon: an empirical lower bound on a federation's privacy loss from one run."""

from fedattack.audit.bound import AuditBound, audit, epsilon_lower_bound, p_value
from fedattack.audit.run import AUDIT_SCHEMA, AuditSpec, audit_federation

__all__ = ["AUDIT_SCHEMA", "AuditBound", "AuditSpec", "audit", "audit_federation", "epsilon_lower_bound",
           "p_value"]
