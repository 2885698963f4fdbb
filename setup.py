"""What `pip install .` and `python -m build` put in site-packages (pyproject.toml has the rest).

The repository keeps its layout (app.py, pages/, assets/, .streamlit/ and checkpoints/ at the
top); the installed package nests them under our own names, so nothing generic lands at the
top of site-packages:

    viz_core/...                  every package found under viz_core/ (find_packages)
    viz_core/checkpoints/NAME/    checkpoints/NAME/ (config.json, vocab.json, card.json, weights)
    viz_core/locale/              locale/<lang>/LC_MESSAGES/attention_lab.po (the interface's catalogue)
    attention_lab/...             attention_lab/ and its sub-packages (ui, cli)
    attention_lab/app/app.py      app.py (the only module taken from the repository's root)
    attention_lab/app/pages/      pages/*.py
    attention_lab/app/assets/     assets/*
    attention_lab/app/.streamlit/ .streamlit/config.toml
    attention_lab/app/deploy/     deploy/nginx.conf.template (attention-lab serve)

A new folder under viz_core/ or attention_lab/ with an __init__.py is found by itself
(tests/unit/test_package.py checks that the wheel holds every module of both).
"""

from setuptools import find_packages, setup
from setuptools.command.build_py import build_py

APP = "attention_lab.app"


class BuildPy(build_py):
    """The app package is the repository's root: of its modules, take app.py only."""

    def find_package_modules(self, package, package_dir):
        modules = super().find_package_modules(package, package_dir)
        if package == APP:
            modules = [m for m in modules if m[1] == "app"]
        return modules


setup(
    packages=[*find_packages(include=["viz_core", "viz_core.*", "attention_lab",
                                      "attention_lab.*"]),
              APP, f"{APP}.pages", "viz_core.checkpoints", "viz_core.locale"],
    package_dir={APP: ".", f"{APP}.pages": "pages", "viz_core.checkpoints": "checkpoints",
                 "viz_core.locale": "locale"},
    package_data={
        APP: ["assets/*", ".streamlit/config.toml", "deploy/nginx.conf.template"],
        "viz_core.checkpoints": ["*/*.json", "*/*.safetensors"],
        "viz_core.locale": ["*/LC_MESSAGES/*.po"],
        "viz_core.training": ["student_text.json.gz"],  # minilm-student's frozen English
    },
    include_package_data=False,
    cmdclass={"build_py": BuildPy},
)
