"""ResolvedServer: the server's secrets and the load's key, resolved once from the config and the environment."""
from lookahead_runner.contracts.auth import LOAD_KEY_ENV
from lookahead_runner.config import ServerConfig, config_from_dict
from lookahead_runner.config import ResolvedServer

KEY = "sk-resolved-0123456789"


def test_the_servers_own_key_is_masked_for_the_record_and_sent_by_the_load():
    server = config_from_dict({"server": {"extra_args": ["--api-key", KEY]}}).server
    resolved = ResolvedServer.resolve(server, {})
    assert KEY not in str(resolved.masked.model_dump()) and "${VLLM_API_KEY}" in resolved.masked.extra_args
    assert resolved.headers == {"Authorization": f"Bearer {KEY}"} and resolved.load_env == {LOAD_KEY_ENV: KEY}
    assert KEY not in repr(resolved)


def test_api_key_env_names_the_key_and_nothing_means_no_header():
    server = ServerConfig(api_key_env="MY_KEY")
    assert ResolvedServer.resolve(server, {"MY_KEY": KEY}).headers == {"Authorization": f"Bearer {KEY}"}
    plain = ResolvedServer.resolve(config_from_dict({}).server, {})
    assert plain.headers == {} and plain.load_env == {}


def test_vllm_api_key_in_the_environment_is_the_key_of_a_server_started_here():
    server = config_from_dict({}).server
    assert ResolvedServer.resolve(server, {"VLLM_API_KEY": KEY}).load_key == KEY
    running = config_from_dict({"server": {"url": "http://127.0.0.1:9"}, "speculation": {"k": [4]}}).server
    assert ResolvedServer.resolve(running, {"VLLM_API_KEY": KEY}).load_key == ""  # not ours: api_key_env says
