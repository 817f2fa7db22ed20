"""Webhooks never reach inside: a URL whose host is (or resolves to) loopback, private, link-local,
reserved or an IPv6 form of one is refused when saved and again at delivery, and a real receiver on
127.0.0.1 hears nothing unless the operator allowed its range. The connection goes to the address that
was checked (a name that resolves elsewhere later cannot move it), no redirect is followed, and the
owner is told "delivered", "failed" or "refused", never how a connection failed."""

from __future__ import annotations

import ipaddress
import re
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from portal.models import Webhook, WebhookDelivery
from portal.notifications import services
from scheduling.api import outbound
from scheduling.errors import DomainError


def port_of(receiver) -> int:
    return int(receiver.url.rsplit(":", 1)[1].split("/")[0])


def inside_urls(port: int) -> list[str]:
    """The same receiver (127.0.0.1:port) under every disguise, and other inside addresses."""
    return [
        f"http://127.0.0.1:{port}/hooks/gpu", f"http://localhost:{port}/hooks/gpu", f"http://[::1]:{port}/hooks/gpu",
        f"http://[::ffff:127.0.0.1]:{port}/hooks/gpu", f"http://127.1:{port}/hooks/gpu",
        f"http://2130706433:{port}/hooks/gpu", f"http://0.0.0.0:{port}/hooks/gpu",
        "http://10.1.2.3/hooks", "http://169.254.169.254/latest/meta-data/", "http://metadata.google.internal/",
        "http://192.168.1.1/", "http://172.16.0.1/", "http://100.64.0.1/", "http://[fe80::1]/", "http://[fd00::1]/",
        "http://[2002:7f00:1::]/", "http://[64:ff9b::a9fe:a9fe]/", "http://224.0.0.1/", "http://240.0.0.1/",
    ]


@pytest.fixture
def resolver(monkeypatch):
    """Names this test gives addresses to, one answer per lookup (the last repeats); every other lookup
    (an address literal, localhost) as the system answers it. Only the resolver is patched."""
    real = socket.getaddrinfo
    names: dict[str, list[list[str]]] = {"metadata.google.internal": [["169.254.169.254"]]}
    asked: dict[str, int] = {}

    def getaddrinfo(host, port, *args, **kwargs):
        if host not in names:
            return real(host, port, *args, **kwargs)
        asked[host] = asked.get(host, 0) + 1
        answers = names[host]
        addresses = answers.pop(0) if len(answers) > 1 else answers[0]
        return [(socket.AF_INET6 if ":" in a else socket.AF_INET, socket.SOCK_STREAM, 6, "",
                 (a, port or 0)) for a in addresses]

    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)
    getaddrinfo.names, getaddrinfo.asked = names, asked
    return getaddrinfo


@pytest.mark.parametrize("address", [
    "127.0.0.1", "127.8.9.10", "::1", "10.0.0.1", "172.31.255.255", "192.168.0.1", "169.254.169.254", "100.64.0.1",
    "0.0.0.0", "::", "224.0.0.1", "ff02::1", "240.0.0.1", "255.255.255.255", "192.0.2.1", "fe80::1", "fc00::1",
    "fd12:3456::1", "::ffff:127.0.0.1", "::ffff:10.0.0.1", "::ffff:169.254.169.254", "2002:7f00:1::",
    "2002:a9fe:a9fe::1", "64:ff9b::7f00:1", "64:ff9b::a00:1", "2001:0:4136:e378:8000:63bf:80ff:fffe",
])
def test_inside_addresses_are_refused(address):
    assert outbound.is_refused(ipaddress.ip_address(address))


@pytest.mark.parametrize("address", ["8.8.8.8", "93.184.216.34", "2001:4860:4860::8888", "::ffff:8.8.8.8"])
def test_public_addresses_are_called(address):
    assert not outbound.is_refused(ipaddress.ip_address(address))


def test_the_allow_list_lets_only_its_ranges_through(settings):
    settings.WEBHOOK_ALLOW_PRIVATE_CIDRS = ["10.20.0.0/16", "fd00:1::/64"]
    assert not outbound.is_refused(ipaddress.ip_address("10.20.3.4"))
    assert not outbound.is_refused(ipaddress.ip_address("::ffff:10.20.3.4"))
    assert not outbound.is_refused(ipaddress.ip_address("fd00:1::5"))
    assert outbound.is_refused(ipaddress.ip_address("10.21.0.1"))
    assert outbound.is_refused(ipaddress.ip_address("127.0.0.1"))


def test_inside_urls_are_refused_when_saved_and_the_receiver_hears_nothing(
        tenants, receiving_server, resolver, client, eager_tasks, django_capture_on_commit_callbacks):
    for url in inside_urls(port_of(receiving_server)):
        with pytest.raises(DomainError) as refused:
            services.save_webhook(tenants.alice, tenants.vision, url)
        assert "url" in refused.value.errors, url  # 127.1 and 2130706433 are no URL to the validator already
    assert not Webhook.objects.exists()
    client.force_login(tenants.alice)  # the page: a 400 with the error on the URL field, nothing stored
    page = client.post("/w/vision-lab/webhook/", {"url": receiving_server.url, "active": "on"})
    assert page.status_code == 400
    assert "does not call this address" in page.content.decode().split('data-field="url"')[1].split("</ul>")[0]
    assert not Webhook.objects.exists() and receiving_server.received == []


def test_an_inside_url_stored_before_is_refused_at_delivery(tenants, receiving_server, eager_tasks, client,
                                                            django_capture_on_commit_callbacks, settings):
    settings.WEBHOOK_ALLOW_PRIVATE_CIDRS = ["127.0.0.1/32"]  # allowed when saved, no longer when delivered
    services.save_webhook(tenants.alice, tenants.vision, receiving_server.url)
    settings.WEBHOOK_ALLOW_PRIVATE_CIDRS = []
    with django_capture_on_commit_callbacks(execute=True):
        services.ping_webhook(tenants.alice, tenants.vision)
    delivery = WebhookDelivery.objects.get()
    assert (delivery.state, delivery.attempts, delivery.last_error) == ("failed", 1, "refused")  # not retried
    assert receiving_server.received == []
    client.force_login(tenants.alice)
    html = client.get("/w/vision-lab/webhook/").content.decode()
    assert "refused: the URL is not one the platform calls" in html and "HTTP" not in html.split('id="deliveries"')[1]


def test_a_local_receiver_gets_deliveries_when_its_range_is_allowed(tenants, receiving_server, eager_tasks,
                                                                    django_capture_on_commit_callbacks, settings):
    settings.WEBHOOK_ALLOW_PRIVATE_CIDRS = ["127.0.0.0/8"]
    services.save_webhook(tenants.alice, tenants.vision, receiving_server.url)
    with django_capture_on_commit_callbacks(execute=True):
        services.ping_webhook(tenants.alice, tenants.vision)
    assert WebhookDelivery.objects.get().state == "delivered"
    (got,) = receiving_server.received
    assert got.json["event"] == "ping"


def test_dns_rebinding_public_when_saved_then_inside_is_refused(tenants, receiving_server, resolver, eager_tasks,
                                                              django_capture_on_commit_callbacks):
    port = port_of(receiving_server)
    resolver.names["hooks.example.test"] = [["93.184.216.34"], ["127.0.0.1"]]
    services.save_webhook(tenants.alice, tenants.vision, f"http://hooks.example.test:{port}/hooks/gpu")
    with django_capture_on_commit_callbacks(execute=True):
        services.ping_webhook(tenants.alice, tenants.vision)
    delivery = WebhookDelivery.objects.get()
    assert (delivery.state, delivery.last_error) == ("failed", "refused")
    assert receiving_server.received == []


def test_a_name_with_one_inside_address_among_public_ones_is_refused(tenants, resolver):
    resolver.names["mixed.example.test"] = [["93.184.216.34", "10.0.0.7"]]
    with pytest.raises(DomainError):
        services.save_webhook(tenants.alice, tenants.vision, "https://mixed.example.test/hooks")


def test_the_connection_goes_to_the_address_that_was_checked(tenants, receiving_server, resolver, eager_tasks,
                                                            django_capture_on_commit_callbacks, settings):
    """The name is looked up once per delivery and the client connects to that address: a second lookup
    (which here would answer an address nothing listens on) never happens."""
    settings.WEBHOOK_ALLOW_PRIVATE_CIDRS = ["127.0.0.1/32"]
    port = port_of(receiving_server)
    resolver.names["hooks.example.test"] = [["127.0.0.1"], ["127.0.0.1"], ["10.255.255.1"]]
    services.save_webhook(tenants.alice, tenants.vision, f"http://hooks.example.test:{port}/hooks/gpu")
    with django_capture_on_commit_callbacks(execute=True):
        services.ping_webhook(tenants.alice, tenants.vision)
    assert WebhookDelivery.objects.get().state == "delivered"
    (got,) = receiving_server.received
    assert got.headers["Host"] == f"hooks.example.test:{port}" and got.path == "/hooks/gpu"
    assert resolver.asked["hooks.example.test"] == 2  # once when saved, once for the delivery


@pytest.fixture
def redirecting_server(receiving_server):
    """Answers every POST with a 307 to the receiving server (which must then hear nothing)."""
    hits = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self):  # noqa: N802 (http.server's name)
            self.rfile.read(int(self.headers.get("Content-Length", 0)))
            hits.append(self.path)
            self.send_response(307)
            self.send_header("Location", receiving_server.url)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/hook", hits
    server.shutdown()
    server.server_close()


def test_no_redirect_is_followed(tenants, receiving_server, redirecting_server, eager_tasks, settings,
                                 django_capture_on_commit_callbacks):
    settings.WEBHOOK_ALLOW_PRIVATE_CIDRS = ["127.0.0.1/32"]
    settings.WEBHOOK_MAX_ATTEMPTS = 1
    url, hits = redirecting_server
    services.save_webhook(tenants.alice, tenants.vision, url)
    with django_capture_on_commit_callbacks(execute=True):
        services.ping_webhook(tenants.alice, tenants.vision)
    delivery = WebhookDelivery.objects.get()
    assert hits == ["/hook"] and receiving_server.received == []
    assert (delivery.state, delivery.last_status, delivery.last_error) == ("failed", 307, "failed")


def test_the_owner_sees_failed_never_how(tenants, webhook_receiver, closed_port_url, eager_tasks, client, settings,
                                        django_capture_on_commit_callbacks):
    settings.WEBHOOK_MAX_ATTEMPTS = 1
    webhook_receiver.statuses = [404]
    services.save_webhook(tenants.alice, tenants.vision, webhook_receiver.url)
    services.save_webhook(tenants.bob, tenants.nlp, closed_port_url)
    with django_capture_on_commit_callbacks(execute=True):
        services.ping_webhook(tenants.alice, tenants.vision)
        services.ping_webhook(tenants.bob, tenants.nlp)
    for user, slug in ((tenants.alice, "vision-lab"), (tenants.bob, "nlp-group")):
        client.force_login(user)
        table = client.get(f"/w/{slug}/webhook/").content.decode().split('id="deliveries"')[1].split("</table>")[0]
        assert "failed" in table
        # The cells' text, not the markup: a delivery's id in data-delivery may hold "404" by chance.
        shown = re.sub(r"<[^>]*>", " ", table)
        assert not any(word in shown for word in ("HTTP", "404", "Connection", "refused", "Error")), shown
        assert table.count("<tr data-delivery") == 1  # its own delivery, not the other tenant's


@pytest.fixture
def tls_server(tmp_path):
    """A TLS server on 127.0.0.1 with a self-signed certificate: it records the name the client asked
    for (SNI) before the client checks the certificate (which it then refuses: no one signed it)."""
    import datetime
    import ssl

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "hooks.example.test")])
    now = datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(1).not_valid_before(now).not_valid_after(now + datetime.timedelta(days=3650))
            .add_extension(x509.SubjectAlternativeName([x509.DNSName("hooks.example.test")]), critical=False)
            .sign(key, hashes.SHA256()))
    (tmp_path / "cert.pem").write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    (tmp_path / "key.pem").write_bytes(key.private_bytes(serialization.Encoding.PEM,
                                                         serialization.PrivateFormat.PKCS8,
                                                         serialization.NoEncryption()))
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(tmp_path / "cert.pem", tmp_path / "key.pem")
    asked: list[str | None] = []
    context.sni_callback = lambda sock, server_name, ctx: asked.append(server_name)
    listener = socket.create_server(("127.0.0.1", 0))
    listener.settimeout(10)

    def serve():
        try:
            conn, _ = listener.accept()
        except OSError:
            return
        with conn:
            try:
                context.wrap_socket(conn, server_side=True).close()
            except (ssl.SSLError, OSError):
                pass  # the client refused the certificate

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield listener.getsockname()[1], asked
    listener.close()
    thread.join(timeout=10)


def test_https_keeps_the_name_for_sni_and_the_certificate_check(tenants, tls_server, resolver, eager_tasks,
                                                                settings, django_capture_on_commit_callbacks):
    """Connected to the checked address, TLS still asks for the name given (SNI) and checks the
    certificate against it: an unsigned one is a failed delivery."""
    settings.WEBHOOK_ALLOW_PRIVATE_CIDRS = ["127.0.0.1/32"]
    settings.WEBHOOK_MAX_ATTEMPTS = 1
    port, asked = tls_server
    resolver.names["hooks.example.test"] = [["127.0.0.1"]]
    services.save_webhook(tenants.alice, tenants.vision, f"https://hooks.example.test:{port}/hooks/gpu")
    with django_capture_on_commit_callbacks(execute=True):
        services.ping_webhook(tenants.alice, tenants.vision)
    assert asked == ["hooks.example.test"]
    assert WebhookDelivery.objects.get().last_error == "failed"
