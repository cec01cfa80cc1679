"""Running the pipeline's jobs with ``spark-submit``: one place for the command line and its settings.

Spark is PySpark's (pip-installed into the venv by ``deploy/spark/install.sh``); the Kafka connector's jars
come from ``.cache/spark-jars/<PySpark version>/`` (same script) and are passed with ``--jars``. Spark runs
in local mode on two cores with little memory and logs at WARN (``clients/pipeline/log4j2.properties``);
its output goes to a file, and a failure raises ``SparkSubmitError`` carrying the file's tail.

Run by hand, with the venv's Python and nothing activated (``spark-submit`` alone needs ``SPARK_HOME``,
the venv's Python for the driver and the repository on ``PYTHONPATH``; this sets all three):

    .venv/bin/python -m clients.pipeline.submit clients/pipeline/streaming_job.py --bootstrap-servers ...
    .venv/bin/python -m clients.pipeline.submit --print-command clients/pipeline/batch_job.py ...

Spark's output then goes to the terminal (``--log FILE`` to send it to a file instead).
"""

from __future__ import annotations

import argparse
import glob
import importlib.metadata
import importlib.util
import os
import shlex
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PIPELINE_DIR = Path(__file__).resolve().parent
INSTALL_SCRIPT = REPO / "deploy" / "spark" / "install.sh"
LOG4J2_PROPERTIES = PIPELINE_DIR / "log4j2.properties"

DEFAULT_CONF: dict[str, str] = {
    "spark.master": "local[2]",
    "spark.driver.memory": "1g",
    "spark.driver.host": "127.0.0.1",
    "spark.driver.bindAddress": "127.0.0.1",
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.shuffle.partitions": "2",
    "spark.sql.session.timeZone": "UTC",
    "spark.sql.streaming.metricsEnabled": "false",
}


class SparkSubmitError(RuntimeError):
    def __init__(self, message: str, log_path: Path, tail: str) -> None:
        super().__init__(f"{message}; tail of {log_path}:\n{tail}")
        self.log_path = log_path
        self.tail = tail


def install(venv: str | os.PathLike[str] | None = None) -> Path:
    """Run deploy/spark/install.sh (PySpark + connector jars; a no-op once done); returns the jar dir."""
    env = dict(os.environ)
    env["VENV"] = str(venv) if venv is not None else str(Path(sys.prefix))
    proc = subprocess.run(["bash", str(INSTALL_SCRIPT)], capture_output=True, text=True, env=env, timeout=1800)
    if proc.returncode != 0:
        raise RuntimeError(f"{INSTALL_SCRIPT} failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}")
    return Path(proc.stdout.strip().splitlines()[-1])


def spark_version() -> str:
    return importlib.metadata.version("pyspark")


def spark_home() -> Path:
    spec = importlib.util.find_spec("pyspark")
    if spec is None or spec.origin is None:
        raise RuntimeError("pyspark is not installed: run `make pipeline` (deploy/spark/install.sh)")
    return Path(spec.origin).parent


def connector_jars() -> list[str]:
    jar_dir = REPO / ".cache" / "spark-jars" / spark_version()
    if not (jar_dir / ".complete").exists():
        raise RuntimeError(f"{jar_dir} is missing: run `make pipeline` (deploy/spark/install.sh)")
    return sorted(glob.glob(str(jar_dir / "*.jar")))


def submit_command(script: str | os.PathLike[str], args: Sequence[str] = (),
                   conf: Mapping[str, str] | None = None) -> list[str]:
    settings = dict(DEFAULT_CONF)
    settings["spark.driver.extraJavaOptions"] = f"-Dlog4j2.configurationFile=file:{LOG4J2_PROPERTIES}"
    settings.update(conf or {})
    cmd = [str(spark_home() / "bin" / "spark-submit"), "--jars", ",".join(connector_jars())]
    for k, v in settings.items():
        cmd += ["--conf", f"{k}={v}"]
    return cmd + [str(script), *args]


def submit_env() -> dict[str, str]:
    env = dict(os.environ)
    env.update({
        "SPARK_HOME": str(spark_home()),
        "PYSPARK_PYTHON": sys.executable,
        "PYSPARK_DRIVER_PYTHON": sys.executable,
        "SPARK_LOCAL_IP": "127.0.0.1",
        "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")])),
        "PYTHONUNBUFFERED": "1",
    })
    return env


def start(script: str | os.PathLike[str], args: Sequence[str], log_path: str | os.PathLike[str],
          conf: Mapping[str, str] | None = None) -> subprocess.Popen[bytes]:
    """Start spark-submit in the background, its stdout and stderr appended to ``log_path``."""
    log_path = Path(log_path)
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with open(log_path, "ab") as log:
        return subprocess.Popen(submit_command(script, args, conf), stdout=log, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, env=submit_env(), cwd=REPO)


def log_tail(log_path: str | os.PathLike[str], chars: int = 8000) -> str:
    try:
        return Path(log_path).read_text(errors="replace")[-chars:]
    except OSError:
        return ""


def wait(proc: subprocess.Popen[bytes], log_path: str | os.PathLike[str], timeout: float) -> None:
    """Wait for a started job; raise SparkSubmitError if it fails or outlives ``timeout``."""
    try:
        rc = proc.wait(timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        raise SparkSubmitError(f"spark-submit still running after {timeout}s", Path(log_path),
                               log_tail(log_path)) from None
    if rc != 0:
        raise SparkSubmitError(f"spark-submit exited with status {rc}", Path(log_path), log_tail(log_path))


def run(script: str | os.PathLike[str], args: Sequence[str], log_path: str | os.PathLike[str],
        conf: Mapping[str, str] | None = None, timeout: float = 600.0) -> None:
    """spark-submit ``script`` and wait for it."""
    wait(start(script, args, log_path, conf), log_path, timeout)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        description="spark-submit a pipeline job with the pipeline's settings (connector jars, local[2], logging)")
    ap.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE", help="an extra Spark setting (repeatable)")
    ap.add_argument("--log", metavar="FILE", help="append Spark's output to FILE instead of the terminal")
    ap.add_argument("--print-command", action="store_true",
                    help="print the environment and the spark-submit command line instead of running them")
    ap.add_argument("script", help="the job, e.g. clients/pipeline/streaming_job.py")
    ap.add_argument("args", nargs=argparse.REMAINDER, help="the job's own arguments")
    args = ap.parse_args(argv)
    conf = {}
    for item in args.conf:
        k, sep, v = item.partition("=")
        if not sep:
            ap.error(f"--conf {item}: expected KEY=VALUE")
        conf[k] = v
    script = Path(args.script).resolve()
    if not script.is_file():
        ap.error(f"{args.script}: no such file")
    try:
        cmd = submit_command(script, args.args, conf)
    except RuntimeError as e:
        print(e, file=sys.stderr)
        return 1
    env = submit_env()
    if args.print_command:
        changed = {k: v for k, v in env.items() if os.environ.get(k) != v}
        print(" ".join(f"{k}={shlex.quote(v)}" for k, v in sorted(changed.items())) + " \\")
        print("    " + " ".join(shlex.quote(c) for c in cmd))
        return 0
    if args.log:
        try:
            run(script, args.args, args.log, conf, timeout=float("inf"))
        except SparkSubmitError as e:
            print(e, file=sys.stderr)
            return 1
        return 0
    os.chdir(REPO)
    os.execve(cmd[0], cmd, env)


if __name__ == "__main__":
    sys.exit(main())
