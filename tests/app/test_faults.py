"""The deployment's secrets file: missing is fine (environment only); a file that cannot be
read stops the app with a message instead of silently dropping its model restrictions."""

import pytest
import streamlit
from streamlit import config
from streamlit.runtime.secrets import Secrets
from streamlit.testing.v1 import AppTest

import viz_core as vc
from tests.support.apptest import APP

SHIPPED = vc.shipped_models()[0]


@pytest.fixture
def secrets_file(tmp_path, monkeypatch):
    """Point Streamlit at a secrets file of the test's own (and a fresh, unparsed st.secrets)."""
    path = tmp_path / "secrets.toml"
    old = config.get_option("secrets.files")
    config.set_option("secrets.files", [str(path)])
    monkeypatch.setattr(streamlit, "secrets", Secrets())
    yield path
    config.set_option("secrets.files", old)


def run_app(**params) -> AppTest:
    at = AppTest.from_file(APP, default_timeout=60)
    for key, value in params.items():
        at.query_params[key] = value
    at.switch_page("pages/attention.py")
    return at.run()


STOPS = "settings file (.streamlit/secrets.toml) could not be read"


@pytest.mark.parametrize("text", [
    '[attention_lab]\nallowed_models = "dates"\nallow_hub = fals\n',  # TOML syntax error
    'attention_lab = "allowed_models=dates"\n',  # not a table
])
def test_a_malformed_secrets_file_stops_the_app(secrets_file, text, caplog):
    secrets_file.write_text(text)
    at = run_app(model=SHIPPED)
    assert not at.exception, [e.message for e in at.exception]
    assert any(STOPS in e.value for e in at.error), [e.value for e in at.error]
    assert not at.selectbox and not at.get("plotly_chart")  # no model was offered or run
    assert any(r.exc_info for r in caplog.records)  # the cause is in the log


def test_a_readable_secrets_file_restricts_the_models(secrets_file):
    secrets_file.write_text(f'[attention_lab]\nallowed_models = "{SHIPPED}"\n')
    at = run_app(model=SHIPPED)
    assert not at.exception and not at.error
    options = at.selectbox(key="model_pick").options
    assert len(options) == 1 and options[0].startswith(SHIPPED)


def test_no_secrets_file_means_environment_only(secrets_file):
    assert not secrets_file.exists()
    at = run_app(model=SHIPPED)
    assert not at.exception and not at.error
    assert len(at.selectbox(key="model_pick").options) > 1 and at.get("plotly_chart")


def test_a_loading_error_keeps_its_cause_in_the_log(tmp_path, caplog):
    """The user reads the short message; the log holds the exception it was raised from."""
    folder = tmp_path / "broken-bert"
    folder.mkdir()
    (folder / "config.json").write_text('{"model_type": "bert"}')  # no tokenizer, no weights
    at = run_app(model=str(folder))
    assert not at.exception
    assert any("Cannot load the" in e.value for e in at.error), [e.value for e in at.error]
    assert not any("Something went wrong" in e.value for e in at.error)
    logged = [r.exc_info[1] for r in caplog.records if r.exc_info]
    assert any(isinstance(e, vc.ModelLoadError) and e.__cause__ is not None for e in logged)
