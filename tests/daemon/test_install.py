#!/usr/bin/env python3
"""e2e: `meson install` makes an installable service.

Installs this build into a DESTDIR and checks what a service needs: both
binaries, the unit with ExecStart at this install's bindir and the
configuration it names, that configuration (absolute paths under
/var/lib/memwald and /run/memwald, accepted by `memwald --check`), the
sysusers.d entry for the unit's User= (systemd-sysusers creates it in the
DESTDIR), the tmpfiles.d entry for /run/memwald (systemd-tmpfiles creates
it there), man pages memwald(8) and memwalctl(1) that groff renders without
warnings, `systemd-analyze verify` on the installed unit (and on a broken
copy, which must fail), and a re-install that keeps an edited
configuration. systemd's tools come from tools/install-deps.sh --test; a
missing one fails the test. Output is TAP.
"""
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "e2e"))  # e2e_util
from e2e_util import check, plan, tidy  # noqa: E402

BUILD = os.environ["MW_BUILD_ROOT"]


def run(args, **kw):
    return subprocess.run(args, capture_output=True, text=True, timeout=120, **kw)


def tool(name):
    path = shutil.which(name)
    check(f"{name} is installed (tools/install-deps.sh --test)", path is not None)
    return path


def main():
    meson = tool("meson")
    analyze, sysusers, tmpfiles, groff = (tool(n) for n in
                                          ("systemd-analyze", "systemd-sysusers", "systemd-tmpfiles", "groff"))
    if not (meson and analyze and sysusers and tmpfiles and groff):
        return plan()
    opts = {o["name"]: o["value"] for o in json.loads(run([meson, "introspect", "--buildoptions", BUILD]).stdout)}
    prefix, configdir = opts["prefix"], opts["configdir"]
    d = tempfile.mkdtemp(prefix="memwald-e2e-install-")
    r = run([meson, "install", "-C", BUILD, "--destdir", d, "--no-rebuild", "--quiet"])
    check("meson install --destdir", r.returncode == 0, r.stdout + r.stderr)
    root = lambda p: d + p  # noqa: E731
    unit_path = f"{prefix}/lib/systemd/system/memwald.service"
    conf_path = f"{configdir}/memwald.conf"
    want = [f"{prefix}/bin/memwald", f"{prefix}/bin/memwalctl", unit_path, conf_path,
            f"{prefix}/lib/sysusers.d/memwald.conf", f"{prefix}/lib/tmpfiles.d/memwald.conf",
            f"{prefix}/share/man/man8/memwald.8", f"{prefix}/share/man/man1/memwalctl.1",
            f"{prefix}/share/doc/memwald/memwald.conf.example"]
    missing = [p for p in want if not os.path.isfile(root(p))]
    check("installed: binaries, unit, configuration, sysusers.d, tmpfiles.d, man pages, example", not missing,
          missing)
    if missing:
        return plan()

    unit = open(root(unit_path)).read()
    check("the unit's ExecStart is this install's memwald with the installed configuration",
          f"\nExecStart={prefix}/bin/memwald -c {conf_path}\n" in unit and "@" not in unit, unit[:600])
    user = re.search(r"^User=(\S+)$", unit, re.M)
    conf = open(root(conf_path)).read()
    paths = dict(re.findall(r"^(data_dir|admin_socket) = (\S+)$", conf, re.M))
    check("the configuration: data_dir /var/lib/memwald, admin socket in /run/memwald (absolute)",
          paths == {"data_dir": "/var/lib/memwald", "admin_socket": "/run/memwald/admin.sock"} and "@" not in conf,
          paths)
    r = run([root(f"{prefix}/bin/memwald"), "-c", root(conf_path), "--print-config"])
    check("its tables live under /var/lib/memwald", r.returncode == 0 and "uri = /var/lib/memwald/events.lance"
          in r.stdout, r.stdout + r.stderr)
    r = run([root(f"{prefix}/bin/memwald"), "-c", root(conf_path), "--check"])
    check("memwald --check accepts it", r.returncode == 0, r.stdout + r.stderr)

    # the user the unit names, and /run/memwald, made by systemd's own tools
    r = run([sysusers, "--root", d])
    passwd = open(root("/etc/passwd")).read() if os.path.exists(root("/etc/passwd")) else ""
    entry = re.search(r"^memwald:x:(\d+):(\d+):[^:]*:/var/lib/memwald:", passwd, re.M)
    check("systemd-sysusers creates the unit's User= (memwald, home /var/lib/memwald)",
          r.returncode == 0 and user and user.group(1) == "memwald" and entry, r.stderr + passwd)
    r = run([tmpfiles, "--root", d, "--create", root(f"{prefix}/lib/tmpfiles.d/memwald.conf")])
    st = os.stat(root("/run/memwald")) if os.path.isdir(root("/run/memwald")) else None
    check("systemd-tmpfiles creates /run/memwald, mode 0750, owned by memwald",
          r.returncode == 0 and st and (st.st_mode & 0o777) == 0o750 and entry
          and st.st_uid == int(entry.group(1)), r.stderr)

    # systemd-analyze verify with the DESTDIR as root: it needs the units the
    # service orders itself after and the commands it runs, so those come
    # from this machine's systemd; man: pages are looked up in the DESTDIR
    os.makedirs(root("/usr/lib/systemd"), exist_ok=True)
    shutil.copytree("/usr/lib/systemd/system", root("/usr/lib/systemd/system"), symlinks=True, dirs_exist_ok=True)
    os.makedirs(root("/usr/bin"), exist_ok=True)
    shutil.copy2(shutil.which("kill") or "/usr/bin/kill", root("/usr/bin/kill"))
    if not os.path.lexists(root("/bin")):
        os.symlink("usr/bin", root("/bin"))
    env = dict(os.environ, MANPATH=root(f"{prefix}/share/man"))
    r = run([analyze, "verify", "--root", d, unit_path], env=env)
    check("systemd-analyze verify the installed unit", r.returncode == 0 and "memwald" not in r.stderr,
          r.stdout + r.stderr)
    broken = f"{prefix}/lib/systemd/system/memwald-broken.service"
    with open(root(broken), "w") as f:
        f.write(unit.replace(f"ExecStart={prefix}/bin/memwald", "ExecStart=/nonexistent/memwald"))
    r = run([analyze, "verify", "--root", d, broken], env=env)
    check("... and it fails a broken copy (ExecStart to a missing binary)", r.returncode != 0, r.stderr)
    os.unlink(root(broken))

    for page in (f"{prefix}/share/man/man8/memwald.8", f"{prefix}/share/man/man1/memwalctl.1"):
        r = run([groff, "-man", "-Tutf8", "-ww", "-z", root(page)])
        check(f"{os.path.basename(page)} renders without warnings", r.returncode == 0 and r.stderr == "", r.stderr)

    with open(root(conf_path), "a") as f:
        f.write("; edited by the operator\n")
    r = run([meson, "install", "-C", BUILD, "--destdir", d, "--no-rebuild", "--quiet"])
    check("a re-install keeps the edited configuration and puts the new default beside it",
          r.returncode == 0 and open(root(conf_path)).read().endswith("; edited by the operator\n")
          and os.path.isfile(root(conf_path + ".dist")), r.stdout + r.stderr)
    tidy(d)
    return plan()


if __name__ == "__main__":
    sys.exit(main())
