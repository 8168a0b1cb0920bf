#!/usr/bin/env python3
"""MW_TEST, the way to run one test case by name (tests/common/cases.h for
the cmocka binaries, chosen() in tests/e2e/e2e_util.py for the scripts):
one case by name runs that case alone, a pattern runs those it matches,
unset runs every case, and a name no case has fails, naming it, instead of
passing with nothing run. TAP output.

  test_one_case.py CMOCKA_BINARY

CMOCKA_BINARY is test_bgprio, whose two cases are test_restore_permitted
and test_restore_not_permitted.
"""
import os
import re
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
E2E = os.path.join(HERE, "..", "e2e")
BINARY = sys.argv[1]
CASES = ["test_restore_permitted", "test_restore_not_permitted"]
results = []


def check(name, ok, detail=""):
    results.append(bool(ok))
    print(("ok" if ok else "not ok") + f" {len(results)} - {name}")
    if not ok:
        for line in str(detail).splitlines()[-30:]:
            print("# " + line)


def run(cmd, want):
    """cmd with MW_TEST=want (None: unset) and cmocka's TAP output."""
    env = dict(os.environ, CMOCKA_MESSAGE_OUTPUT="TAP")
    env.pop("MW_TEST", None)
    if want is not None:
        env["MW_TEST"] = want
    r = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=60)
    return r.returncode, r.stdout, r.stderr


def ran(out):
    """The names of the TAP points that passed, and the plan's count."""
    oks = re.findall(r"^ok \d+ - (\S+)", out, re.M)
    plan = re.search(r"^1\.\.(\d+)", out, re.M)
    return oks, int(plan.group(1)) if plan else None


def cmocka():
    rc, out, err = run([BINARY], None)
    oks, n = ran(out)
    check("cmocka, MW_TEST unset: every case runs", rc == 0 and sorted(oks) == sorted(CASES) and n == 2, out + err)
    rc, out, err = run([BINARY], CASES[0])
    oks, n = ran(out)
    check(f"cmocka, MW_TEST={CASES[0]}: that case alone, the plan says 1", rc == 0 and oks == [CASES[0]] and n == 1,
          out + err)
    rc, out, err = run([BINARY], "test_restore_*")
    oks, n = ran(out)
    check("cmocka, MW_TEST=test_restore_*: both cases the pattern matches",
          rc == 0 and sorted(oks) == sorted(CASES) and n == 2, out + err)
    rc, out, err = run([BINARY], "test_restore_permited")
    check("cmocka, MW_TEST=test_restore_permited (a typo): exit 1, Bail out! naming it and the cases there are",
          rc == 1 and "Bail out! MW_TEST=test_restore_permited names no test case" in out
          and all(c in out for c in CASES) and "test_restore_permited" in err and not ran(out)[0], out + err)


SCRIPT = r"""
import sys
sys.path.insert(0, sys.argv[1])
from e2e_util import check, chosen, plan
if sys.argv[2] == "cases":
    for name, fn in chosen([("alpha", 1), ("beta", 2), ("beta_two", 3)]):
        check(f"ran {name}", True)
sys.exit(plan())
"""


def script():
    py = [sys.executable, "-c", SCRIPT, E2E]
    rc, out, err = run(py + ["cases"], None)
    check("e2e_util.chosen, MW_TEST unset: every case",
          rc == 0 and all(f"ran {c}\n" in out for c in ("alpha", "beta", "beta_two")) and "1..3" in out, out + err)
    rc, out, err = run(py + ["cases"], "beta")
    check("e2e_util.chosen, MW_TEST=beta: that case alone", rc == 0 and "ok 1 - ran beta\n1..1" in out, out + err)
    rc, out, err = run(py + ["cases"], "beta*")
    check("e2e_util.chosen, MW_TEST=beta*: the two it matches",
          rc == 0 and "ran beta\n" in out and "ran beta_two" in out and "1..2" in out, out + err)
    rc, out, err = run(py + ["cases"], "gamma")
    check("e2e_util.chosen, MW_TEST=gamma: exit 1 at once, a failed check naming it and the cases",
          rc == 1 and "not ok 1 - MW_TEST=gamma names a case" in out and "alpha beta beta_two" in out
          and "1..1" in out and "ran " not in out, out + err)
    rc, out, err = run(py + ["none"], "gamma")
    check("a script without cases, MW_TEST=gamma: plan() fails naming it",
          rc == 1 and "not ok 1 - MW_TEST=gamma names a case" in out and "no cases to choose from" in out, out + err)
    rc, out, err = run(py + ["none"], None)
    check("a script without cases, MW_TEST unset: passes", rc == 0 and "1..0" in out, out + err)


def main():
    cmocka()
    script()
    print(f"1..{len(results)}")
    return 0 if all(results) else 1


if __name__ == "__main__":
    sys.exit(main())
