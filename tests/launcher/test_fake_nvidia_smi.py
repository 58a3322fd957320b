"""The fake nvidia-smi prints what the real one printed on the H200 (tests/fixtures/real-h200)."""

import subprocess

import pytest

from prebake_testing.hosts import REAL_H200, make_fake_nvidia_smi

FIELDS = "index,name,memory.total,driver_version,compute_cap,pci.bus_id,uuid"
WIDE = ("index,name,memory.total,memory.used,memory.free,driver_version,compute_cap,pci.bus_id,uuid,"
        "persistence_mode,mig.mode.current")


def smi(tmp_path, profile, *args):
    return subprocess.run([str(make_fake_nvidia_smi(tmp_path, profile)), *args], capture_output=True, text=True)


@pytest.mark.parametrize("fields,fmt,capture", [
    (FIELDS, "csv,noheader,nounits", "query_noheader_nounits.csv"),
    (FIELDS, "csv", "query_header_units.csv"),
    (WIDE, "csv,noheader,nounits", "query_wide.csv"),
])
def test_fake_matches_the_real_h200_capture(tmp_path, fields, fmt, capture):
    done = smi(tmp_path, "h200_580", f"--query-gpu={fields}", f"--format={fmt}")
    assert done.returncode == 0
    assert done.stdout == (REAL_H200 / capture).read_text()


def test_invalid_field_like_the_real_one(tmp_path):
    done = smi(tmp_path, "h200_580", "--query-gpu=bogus_field", "--format=csv")
    expected = (REAL_H200 / "bad_field.txt").read_text()
    assert done.returncode == int(expected.rsplit("rc=", 1)[1])
    assert done.stdout == expected.rsplit("rc=", 1)[0]


def test_fake_answers_any_field_order_and_no_gpu(tmp_path):
    done = smi(tmp_path, "a40x2_570", "--query-gpu=compute_cap,name", "--format=csv,noheader")
    assert done.stdout.splitlines() == ["8.6, NVIDIA A40", "8.6, NVIDIA A40"]
    empty = smi(tmp_path, "no_gpu", "--query-gpu=index", "--format=csv")
    assert empty.returncode == 6 and "No devices were found" in empty.stdout
