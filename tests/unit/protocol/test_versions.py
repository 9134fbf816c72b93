"""``version_desc``: a client's MQVersion ordinal by name, as Java's ``MQVersion.getVersionDesc``."""

from __future__ import annotations

from rocketlite.protocol.codes import MQVersion
from rocketlite.protocol.versions import VERSION_NAMES, version_desc


def test_the_ordinals_clients_send_have_java_s_names() -> None:
    # ali-ons 3.12.0 sends 121, the C++ 0.4.4 wheel 63, Java 4.9.4 401 and 5.3.3 479
    assert [version_desc(v) for v in (121, 63, 401, 479)] == \
        ["V3_4_9", "V3_1_8", "V4_9_4", "V5_3_3"]
    assert all(version_desc(m.value) == m.name for m in MQVersion)


def test_the_enum_s_irregular_parts() -> None:
    assert len(VERSION_NAMES) == 613 and len(set(VERSION_NAMES)) == 613  # 5.3.3's enum
    assert VERSION_NAMES[:3] == ("V3_0_0_SNAPSHOT", "V3_0_0_ALPHA1", "V3_0_0_BETA1")
    assert version_desc(7) == "V3_0_0_BETA6_SNAPSHOT" and version_desc(15) == "V3_0_0_FINAL"
    assert version_desc(44) == "V3_0_15_SNAPSHOT" and version_desc(46) == "V3_1_0_SNAPSHOT"
    # 3.3 to 3.9 have no _0 patch: V3_2_9 is followed by V3_3_1
    assert VERSION_NAMES[VERSION_NAMES.index("V3_2_9") + 1] == "V3_3_1_SNAPSHOT"
    assert version_desc(211) == "V3_9_9" and version_desc(212) == "V4_0_0_SNAPSHOT"
    assert version_desc(611) == "V5_9_9"


def test_past_the_end_and_negative() -> None:
    assert version_desc(612) == version_desc(10_000) == "HIGHER_VERSION"
    assert version_desc(-1) == "-1"
