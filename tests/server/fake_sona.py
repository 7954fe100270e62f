"""A local fake of a SONA Systems site's two completion URLs, checking every request against SONA's
documentation (sona-systems.com: "External Study Credit Granting", "Server-Side Completion URL
Responses", "Client-Side Completion URL Responses"):

* client-side ``/webstudy_credit.aspx?experiment_id=..&credit_token=..&survey_code=..``, loaded by
  the participant's browser: an HTML page with the status message;
* server-side ``/services/SonaAPI.svc/WebstudyCredit`` with the same three parameters, which "must
  be specified as part of the URL (an HTTP GET) and not via an HTTP POST request": an XML
  ``WebstudyCreditResponse`` whose ``Result`` has ``credit_status`` ``G`` when granted, or whose
  ``Errors`` hold the reason (``Result`` then nil).

A survey code is issued by ``sign_up`` (SONA puts one per sign-up into the study URL as
%SURVEY_CODE%); it is credited once, a repeat answers "already received credit". Every request is
kept in ``requests``, every credit in ``credits``; ``fail_next`` answers that many server-side calls
with HTTP 503 and ``hold`` blocks server-side calls until released."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from html import escape

from werkzeug.serving import make_server
from werkzeug.wrappers import Request, Response

EXPERIMENT_ID = "123"
CREDIT_TOKEN = "9185d436e5f94b1581b0918162e8"
PARAMS = {"experiment_id", "credit_token", "survey_code"}
NS = ('xmlns="http://tempuri.org/" '
      'xmlns:a="http://schemas.datacontract.org/2004/07/emsdotnet.sonasystems" '
      'xmlns:i="http://www.w3.org/2001/XMLSchema-instance"')


@dataclass
class Call:
    """One request the fake received."""

    side: str  # "client" or "server"
    method: str
    args: dict[str, list[str]]
    outcome: str


@dataclass
class FakeSona:
    """The fake SONA site; ``url`` once started."""

    requests: list[Call] = field(default_factory=list)
    credits: list[tuple[str, str]] = field(default_factory=list)  # (survey code, side)
    codes: set[str] = field(default_factory=set)
    fail_next: int = 0
    hold: threading.Event | None = None
    url: str = ""
    _next: int = 40000
    _lock: threading.Lock = field(default_factory=threading.Lock)

    # --- what a researcher copies from the study's page on SONA ---

    @property
    def client_side_url(self) -> str:
        return (f"{self.url}/webstudy_credit.aspx?experiment_id={EXPERIMENT_ID}"
                f"&credit_token={CREDIT_TOKEN}&survey_code={{participant_id}}")

    @property
    def server_side_url(self) -> str:
        return (f"{self.url}/services/SonaAPI.svc/WebstudyCredit?experiment_id={EXPERIMENT_ID}"
                f"&credit_token={CREDIT_TOKEN}&survey_code={{participant_id}}")

    def sign_up(self) -> str:
        """A new sign-up's survey code (SONA's are numbers)."""
        with self._lock:
            self._next += 7
            code = str(self._next)
            self.codes.add(code)
        return code

    def server_calls(self, code: str | None = None) -> list[Call]:
        return [c for c in self.requests if c.side == "server"
                and (code is None or c.args.get("survey_code") == [code])]

    def credited(self, code: str) -> int:
        return sum(1 for c, _ in self.credits if c == code)

    # --- the site ---

    def _grant(self, args: dict[str, list[str]], side: str) -> tuple[str, str | None]:
        """(outcome, error message): SONA's checks in its documented order."""
        if set(args) != PARAMS or any(len(v) != 1 for v in args.values()):
            return "bad_params", f"expected exactly {sorted(PARAMS)}, got {sorted(args)}"
        if args["experiment_id"] != [EXPERIMENT_ID] or args["credit_token"] != [CREDIT_TOKEN]:
            return "bad_token", "Invalid experiment_id or credit_token."
        code = args["survey_code"][0]
        if not code:
            return "bad_code", "Invalid survey_code."
        with self._lock:
            if code not in self.codes:
                return "bad_code", f"Invalid survey_code. {len(code)}"
            if any(c == code for c, _ in self.credits):
                return "already", "You have already received credit for this study."
            self.credits.append((code, side))
        return "granted", None

    def __call__(self, environ, start_response):
        request = Request(environ)
        args = {k: request.args.getlist(k) for k in request.args}
        if request.path == "/webstudy_credit.aspx":
            return self._client_side(request, args)(environ, start_response)
        if request.path == "/services/SonaAPI.svc/WebstudyCredit":
            return self._server_side(request, args)(environ, start_response)
        return Response("not found", 404)(environ, start_response)

    def _client_side(self, request: Request, args: dict[str, list[str]]) -> Response:
        outcome, error = self._grant(args, "client") if request.method == "GET" else (
            "bad_method", "GET only")
        self.requests.append(Call("client", request.method, args, outcome))
        text = "Web study credit successfully granted." if error is None else error
        return Response(f"<!doctype html><title>SONA</title><p id='sona-status'>{escape(text)}</p>",
                        200, content_type="text/html; charset=utf-8")

    def _server_side(self, request: Request, args: dict[str, list[str]]) -> Response:
        if self.hold is not None:
            self.hold.wait(30)
        with self._lock:
            failing = self.fail_next > 0
            self.fail_next -= failing
        if failing:
            self.requests.append(Call("server", request.method, args, "unavailable"))
            return Response("Service Unavailable", 503)
        if request.method != "GET":  # "must be ... an HTTP GET and not via an HTTP POST request"
            self.requests.append(Call("server", request.method, args, "bad_method"))
            return Response("Method not allowed", 405)
        outcome, error = self._grant(args, "server")
        self.requests.append(Call("server", request.method, args, outcome))
        code = escape((args.get("survey_code") or [""])[0])
        if error is None:
            body = (f"<a:Errors i:nil=\"true\"/><a:Result><a:anon_id_code i:nil=\"true\"/>"
                    f"<a:credit_status>G</a:credit_status><a:signup_id>123</a:signup_id>"
                    f"<a:survey_code>{code}</a:survey_code></a:Result>")
        else:
            body = (f"<a:Errors><a:string>{escape(error)}</a:string></a:Errors>"
                    f"<a:Result i:nil=\"true\"/>")
        xml = (f"<WebstudyCreditResponse {NS}><WebstudyCreditResult>{body}"
               f"</WebstudyCreditResult></WebstudyCreditResponse>")
        return Response(xml, 200, content_type="application/xml; charset=utf-8")


class RunningSona:
    """The fake served on a free local port in a thread; ``stop`` takes it down, ``start`` brings
    it back on the same port (SONA unreachable in between)."""

    def __init__(self, fake: FakeSona | None = None):
        self.fake = fake or FakeSona()
        self.port = 0
        self.start()

    def start(self) -> None:
        self.server = make_server("127.0.0.1", self.port, self.fake, threaded=True)
        self.port = self.server.server_port
        self.fake.url = f"http://127.0.0.1:{self.port}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(5)
