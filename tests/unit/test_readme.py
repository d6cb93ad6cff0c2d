"""The README's two commands and CI's script say the same thing: CI installs the packages of the
README's setup command and runs the README's test command as written."""
import pathlib
import re
import shlex

ROOT = pathlib.Path(__file__).resolve().parents[2]


def _readme_commands() -> list:
    text = (ROOT / "README.md").read_text()
    section = text[text.index("## The two commands"):]
    section = section[:section.index("\n## ", 1)]
    return re.findall(r"```bash\n(.*?)\n```", section, re.S)


def _installed(command: str) -> set:
    """The packages named by the ``pip install`` commands of a shell line (options left out)."""
    found = set()
    for part in re.split(r"&&|\n", command):
        words = shlex.split(part)
        if "install" in words and any(w.endswith("pip") for w in words):
            found.update(w for w in words[words.index("install") + 1:] if not w.startswith("-"))
    return found


def test_ci_installs_what_the_readme_installs():
    setup = _readme_commands()[0]
    script = (ROOT / ".ci" / "run").read_text()
    ci_lines = [line for line in script.splitlines()
                if "install" in line and not line.startswith("#") and "--upgrade pip" not in line]
    assert _installed(setup) == _installed("\n".join(ci_lines))
    assert "transformers" in _installed(setup)  # tests/e2e/test_models.py needs it


def test_ci_runs_the_readme_test_command():
    test_command = _readme_commands()[1].strip()
    script = (ROOT / ".ci" / "run").read_text().splitlines()
    marker = script.index("# The README's test command:")
    assert script[marker + 1].strip() == test_command
    assert not any("BRAZE_CACHE_DIR" in line for line in script if not line.startswith("#"))
