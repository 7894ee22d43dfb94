"""kraftnode.features against Kafka 4.4.0's own classes: MetadataVersion.VERSIONS and the
production Feature enum, read by a small Java program run on the 4.4 jars."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from kraftnode import features
from kraftnode.controller.versions import MetadataVersion
from tests.support.kafka import KafkaHome

DUMP = r"""
import org.apache.kafka.server.common.*;
public class Dump {
  public static void main(String[] a) {
    for (MetadataVersion mv : MetadataVersion.VERSIONS)
      System.out.println("MV " + mv.version() + " " + mv.featureLevel() + " " + mv.isProduction()
        + " " + mv.isElrSupported() + " " + mv.isCordonedLogDirsSupported()
        + " " + mv.isControllerUnregistrationSupported() + " " + mv.registerBrokerRecordVersion()
        + " " + mv.partitionRecordVersion() + " " + mv.partitionChangeRecordVersion());
    System.out.println("LATEST " + MetadataVersion.LATEST_PRODUCTION + " MIN " + MetadataVersion.MINIMUM_VERSION);
    for (Feature f : Feature.PRODUCTION_FEATURES) {
      StringBuilder sb = new StringBuilder("F " + f.featureName() + " " + f.latestProduction());
      for (FeatureVersion v : f.featureVersions())
        sb.append(" ").append(v.featureLevel()).append("@").append(v.bootstrapMetadataVersion().featureLevel())
          .append(v.dependencies().isEmpty() ? "" : v.dependencies().toString().replace(" ", ""));
      for (MetadataVersion mv : MetadataVersion.VERSIONS) sb.append(" d").append(f.defaultLevel(mv));
      System.out.println(sb);
    }
  }
}
"""


def test_the_tables_are_kafka_44s(kafka44: KafkaHome, tmp_path: Path) -> None:
    if shutil.which("javac") is None:
        pytest.skip("javac not installed")
    (tmp_path / "Dump.java").write_text(DUMP)
    cp = str(kafka44.libs / "*")
    subprocess.run(["javac", "-cp", cp, "Dump.java"], cwd=tmp_path, check=True, timeout=120)
    out = subprocess.run(["java", "-cp", f"{cp}:.", "Dump"], cwd=tmp_path, check=True, timeout=120,
                         capture_output=True, text=True).stdout.splitlines()
    mvs = [ln.split() for ln in out if ln.startswith("MV ")]
    assert {m[1]: int(m[2]) for m in mvs} == features.METADATA_VERSIONS
    for _, name, level, prod, elr, cordoned, unreg, rbr, pr, pcr in mvs:
        mv = MetadataVersion(int(level))
        assert str(mv) == name
        assert [str(mv.is_production()).lower(), str(mv.is_elr_supported()).lower(),
                str(mv.is_cordoned_log_dirs_supported()).lower(),
                str(mv.is_controller_unregistration_supported()).lower()] == [prod, elr, cordoned, unreg]
        assert (mv.register_broker_record_version(), mv.partition_record_version(),
                mv.partition_change_record_version()) == (int(rbr), int(pr), int(pcr)), name
    assert f"LATEST {features.LATEST_PRODUCTION} MIN {features.MINIMUM_VERSION}" in out
    java = {ln.split()[1]: ln.split()[2:] for ln in out if ln.startswith("F ")}
    assert list(java) == list(features.FEATURES)
    for name, fdef in features.FEATURES.items():
        words = java[name]
        assert int(words[0]) == fdef.latest_production
        levels = [w for w in words[1:] if not w.startswith("d")]
        ours = [f"{lv.level}@{lv.bootstrap_mv}"
                + ("{" + ",".join(f"{k}={v}" for k, v in lv.dependencies.items()) + "}" if lv.dependencies else "")
                for lv in fdef.levels]
        assert levels == ours, name
        defaults = [int(w[1:]) for w in words[1:] if w.startswith("d")]
        assert defaults == [fdef.default_level(lvl) for lvl in features.METADATA_VERSIONS.values()], name
