"""The feasibility advisor (chapter 35.6): which credibility methods a deployment's resources
support, per content pool, with the prerequisites each lacks and the cost arithmetic of each
feasible one — never a ranking by headline numbers.

* :mod:`~credrank.advise.pools` — the TOML profile (pools and their resources);
* :mod:`~credrank.advise.methods` — the declared prerequisite table and the check;
* :mod:`~credrank.advise.arithmetic` — the chapter's numbers (35.5 attention reweighting,
  35.6 calibration costs) as pure functions;
* :mod:`~credrank.advise.from_index` — a one-pool profile derived from an index's payloads
  (``credrank advise --index DIR``), each derived key with its measurement and rule.

``credrank advise PROFILE.toml [--json]`` prints the advice; the chapter's three-pool
marketplace example ships as :func:`bundled_profile_path("marketplace")
<credrank.advise.pools.bundled_profile_path>`.
"""

from credrank.advise.methods import (
    DEFER,
    METHODS,
    Method,
    MethodAdvice,
    PoolAdvice,
    Prerequisite,
    advice_document,
    advise_pool,
    advise_profile,
)
from credrank.advise.pools import (
    Pool,
    Profile,
    ProfileError,
    bundled_profile_path,
    load_profile,
    parse_profile,
)

__all__ = [
    "DEFER",
    "METHODS",
    "Method",
    "MethodAdvice",
    "Pool",
    "PoolAdvice",
    "Prerequisite",
    "Profile",
    "ProfileError",
    "advice_document",
    "advise_pool",
    "advise_profile",
    "bundled_profile_path",
    "load_profile",
    "parse_profile",
]
