"""Audited epsilon: an empirical lower bound on a federation's privacy loss, from one run or many."""

from fedattack.audit.bound import AuditBound, audit, epsilon_lower_bound, p_value
from fedattack.audit.gdp import GDPBound, audit_gdp, epsilon_of_mu, mu_of_epsilon
from fedattack.audit.run import AUDIT_SCHEMA, AuditSpec, audit_federation

__all__ = ["AUDIT_SCHEMA", "AuditBound", "AuditSpec", "GDPBound", "audit", "audit_federation", "audit_gdp",
           "epsilon_lower_bound", "epsilon_of_mu", "mu_of_epsilon", "p_value"]
