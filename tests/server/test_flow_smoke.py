from tests.server.conftest import auth, enter


def test_smoke(client):
    pid, token = enter(client)
    tl = client.get(f"/api/v1/participants/{pid}/timeline", headers=auth(token)).get_json()
    assert tl["n_trials"] > 0
