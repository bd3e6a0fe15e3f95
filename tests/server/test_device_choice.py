"""`--device auto` (the default): the start-up line says where the model runs
and why; a device that is not there, or not a device, is a clear error."""
import os
import subprocess

from conftest import Server


def driver_present():
    return os.path.exists("/proc/driver/nvidia") or os.path.exists("/dev/nvidiactl")


def test_start_line_names_the_device_and_the_reason(ingot_bin, tiny_model):
    s = Server(ingot_bin, tiny_model)
    try:
        line = next(l for l in s.output if "serving" in l)
        if driver_present():
            assert " on cuda (" in line or " on cpu (" in line, line
        else:
            assert line.rstrip().endswith(" on cpu (no NVIDIA driver)"), line
    finally:
        s.stop()


def test_explicit_device_is_reported_and_bad_devices_refused(ingot_bin, tiny_model):
    s = Server(ingot_bin, tiny_model, "--device", "cpu")
    try:
        assert any(l.rstrip().endswith(" on cpu (--device cpu)") for l in s.output if "serving" in l), s.output
    finally:
        s.stop()
    r = subprocess.run([ingot_bin, "generate", "--model", str(tiny_model), "--prompt-ids", "1,2", "--device", "tpu"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode != 0 and "device" in r.stderr.lower(), r.stderr
    if not driver_present():
        r = subprocess.run([ingot_bin, "generate", "--model", str(tiny_model), "--prompt-ids", "1,2", "--device", "cuda"],
                           capture_output=True, text=True, timeout=60)
        assert r.returncode != 0 and "cuda" in r.stderr.lower(), r.stderr
