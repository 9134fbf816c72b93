"""The names of ``MQVersion.Version`` ordinals, as Java's ``MQVersion.getVersionDesc`` gives them.

A client announces its version as the enum's ordinal in every request header (ali-ons 121, the
C++ 0.4.4 wheel 63, Java 5.3.3 479). mqadmin's ``consumerConnection`` and ``producerConnection``
show it by name (``V3_4_9``), and so do rocketlite's admin tables, dashboard and metrics labels.

The enum (``common/MQVersion.java``, 613 members in 5.3.3) is regular enough to build rather than
copy: V3_0_0's pre-releases, then a ``_SNAPSHOT`` and a release per version, V3_0_1 to V3_0_15,
V3_1_0 to V3_2_9, V3_3_1 to V3_9_9 (no ``_0`` patch), V4_0_0 to V5_9_9, and ``HIGHER_VERSION``.
"""

from __future__ import annotations

from typing import Final


def _names() -> tuple[str, ...]:
    names = ["V3_0_0_SNAPSHOT", "V3_0_0_ALPHA1", *(f"V3_0_0_BETA{i}" for i in range(1, 6))]
    for i in range(6, 10):
        names += [f"V3_0_0_BETA{i}_SNAPSHOT", f"V3_0_0_BETA{i}"]
    names.append("V3_0_0_FINAL")
    releases = [(3, 0, p) for p in range(1, 16)]
    releases += [(3, m, p) for m in (1, 2) for p in range(10)]
    releases += [(3, m, p) for m in range(3, 10) for p in range(1, 10)]
    releases += [(major, m, p) for major in (4, 5) for m in range(10) for p in range(10)]
    for major, minor, patch in releases:
        name = f"V{major}_{minor}_{patch}"
        names += [f"{name}_SNAPSHOT", name]
    names.append("HIGHER_VERSION")
    return tuple(names)


VERSION_NAMES: Final = _names()
"""``MQVersion.Version.values()`` names, by ordinal."""


def version_desc(ordinal: int) -> str:
    """``MQVersion.getVersionDesc``: the ordinal's name; ``HIGHER_VERSION`` past the enum's end,
    the number itself for a negative one (Java would throw)."""
    if ordinal < 0:
        return str(ordinal)
    return VERSION_NAMES[min(ordinal, len(VERSION_NAMES) - 1)]
