"""LDAP sign-in against a real OpenLDAP (slapd, started once per session on loopback, seeded from an LDIF):
the /login/ form signs directory users in, their groups give workspace roles at each sign-in, a group taken
away in the directory takes the role away at the next one (never a hand-made membership), failures are
ordinary failed sign-ins, and with LDAP off nothing reaches for a directory."""

from __future__ import annotations

import base64
import hashlib
import ipaddress
import os
import ssl
import subprocess
import time
import uuid
from dataclasses import dataclass

import pytest
from django.contrib.auth import get_user_model
from django.test import Client, override_settings

from portal.console.models import AuditEntry
from portal.models import Membership, Role
from portal.testing import free_port
from tests.factories import MembershipFactory
from tests.identity.test_ldap_off import no_connection
from tests.world import PASSWORDS

SLAPD, SLAPADD = "/usr/sbin/slapd", "/usr/sbin/slapadd"
SUFFIX = "dc=example,dc=org"
ROOT_DN, ROOT_PASSWORD = f"cn=root,{SUFFIX}", "root-secret"
SERVICE_DN, SERVICE_PASSWORD = f"cn=portal,{SUFFIX}", "portal-secret"
PEOPLE, GROUPS = f"ou=people,{SUFFIX}", f"ou=groups,{SUFFIX}"
CONTRACTORS = f"ou=contractors,{SUFFIX}"  # people a bind template under PEOPLE cannot spell: search, then bind
# uid: (its OUs, password); dup-ldap is in both: a search that finds two entries signs nobody in
SEARCHED = {"frank-ldap": ([CONTRACTORS], "frank-ldap-Secret5"), "dup-ldap": ([PEOPLE, CONTRACTORS], "dup-ldap-Secret6")}
LDAP_PASSWORDS = {"alice-ldap": "alice-ldap-Secret1", "bob-ldap": "bob-ldap-Secret2", "alice": "directory-alice-3"}
GROUP_ROLES = {"ml-vision-owners": [{"workspace": "vision-lab", "role": "owner"}],
               "ml-vision-viewers": [{"workspace": "vision-lab", "role": "viewer"}],
               "nlp-members": [{"workspace": "nlp-group", "role": "member"}]}
MEMBERS = {"ml-vision-owners": ["alice-ldap"], "ml-vision-viewers": ["alice-ldap"], "nlp-members": ["bob-ldap"]}


def _ssha(password: str) -> str:
    salt = os.urandom(8)
    return "{SSHA}" + base64.b64encode(hashlib.sha1(password.encode() + salt).digest() + salt).decode()


def _seed_ldif() -> str:
    entries = [
        f"dn: {SUFFIX}\nobjectClass: dcObject\nobjectClass: organization\ndc: example\no: Example",
        f"dn: {PEOPLE}\nobjectClass: organizationalUnit\nou: people",
        f"dn: {GROUPS}\nobjectClass: organizationalUnit\nou: groups",
        f"dn: {CONTRACTORS}\nobjectClass: organizationalUnit\nou: contractors",
        f"dn: {SERVICE_DN}\nobjectClass: organizationalRole\nobjectClass: simpleSecurityObject\ncn: portal\n"
        f"userPassword: {_ssha(SERVICE_PASSWORD)}",
    ]
    for uid, password in LDAP_PASSWORDS.items():
        given = uid.split("-")[0].title()
        entries.append(f"dn: uid={uid},{PEOPLE}\nobjectClass: inetOrgPerson\nuid: {uid}\ncn: {given} Directory\n"
                       f"sn: Directory\ngivenName: {given}\nmail: {uid}@example.org\nuserPassword: {_ssha(password)}")
    for uid, (units, password) in SEARCHED.items():
        entries.extend(f"dn: uid={uid},{unit}\nobjectClass: inetOrgPerson\nuid: {uid}\ncn: {uid}\nsn: Directory\n"
                       f"mail: {uid}@example.org\nuserPassword: {_ssha(password)}" for unit in units)
    for group, uids in MEMBERS.items():
        members = "".join(f"member: uid={uid},{PEOPLE}\n" for uid in uids)
        entries.append(f"dn: cn={group},{GROUPS}\nobjectClass: groupOfNames\ncn: {group}\n{members}".rstrip())
    return "\n\n".join(entries) + "\n"


SLAPD_CONF = """\
TLSCertificateFile {dir}/cert.pem
TLSCertificateKeyFile {dir}/key.pem
include /etc/ldap/schema/core.schema
include /etc/ldap/schema/cosine.schema
include /etc/ldap/schema/inetorgperson.schema
modulepath /usr/lib/ldap
moduleload back_mdb
moduleload memberof
pidfile {dir}/slapd.pid
database mdb
maxsize 16777216
suffix "{suffix}"
rootdn "{root_dn}"
rootpw {root_password}
directory {dir}/db
overlay memberof
memberof-group-oc groupOfNames
memberof-member-ad member
memberof-memberof-ad memberOf
access to attrs=userPassword by self auth by anonymous auth by * none
access to dn.subtree="{people}" by dn.exact="{service_dn}" read by users read by * none
access to * by dn.exact="{service_dn}" read by self read by * none
"""


@dataclass
class Directory:
    url: str  # ldap:// (StartTLS offered)
    ldaps_url: str  # ldaps://, the same directory
    ca_file: str  # the CA that signed the certificate it offers on both
    other_ca_file: str  # a CA that signed nothing of it


@pytest.fixture(scope="session")
def slapd(tmp_path_factory):
    """A slapd of this session's own (its own config, database and loopback port, as the current user):
    independent of any system slapd on 389."""
    if not (os.path.exists(SLAPD) and os.path.exists(SLAPADD)):
        pytest.skip(f"{SLAPD} is missing: install Debian's slapd and ldap-utils (.ci/run does)")
    work = tmp_path_factory.mktemp("slapd")
    (work / "db").mkdir()
    conf = work / "slapd.conf"
    conf.write_text(SLAPD_CONF.format(dir=work, suffix=SUFFIX, root_dn=ROOT_DN, root_password=ROOT_PASSWORD,
                                      service_dn=SERVICE_DN, people=PEOPLE))
    (work / "seed.ldif").write_text(_seed_ldif())
    _write_certificate(work)
    subprocess.run([SLAPADD, "-f", str(conf), "-l", str(work / "seed.ldif")], check=True, capture_output=True)
    url, ldaps_url = f"ldap://127.0.0.1:{free_port()}", f"ldaps://127.0.0.1:{free_port()}"
    # -d 0: in the foreground (so it ends with the session), logging nothing
    proc = subprocess.Popen([SLAPD, "-f", str(conf), "-h", f"{url}/ {ldaps_url}/", "-d", "0"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    import ldap3

    deadline = time.monotonic() + 20
    while True:
        try:
            ldap3.Connection(ldap3.Server(url, connect_timeout=1), ROOT_DN, ROOT_PASSWORD, auto_bind=True).unbind()
            break
        except ldap3.core.exceptions.LDAPException:
            if proc.poll() is not None or time.monotonic() > deadline:
                proc.kill()
                pytest.fail(f"slapd did not start: {proc.stderr.read().decode(errors='replace')[-2000:]}")
            time.sleep(0.1)
    yield Directory(url=url, ldaps_url=ldaps_url, ca_file=str(work / "ca.pem"), other_ca_file=str(work / "other-ca.pem"))
    proc.terminate()
    proc.wait(timeout=10)


def _write_certificate(work) -> None:
    """A CA (ca.pem) and the certificate for 127.0.0.1 it signs (cert.pem, key.pem: slapd's, for StartTLS and
    ldaps://); other-ca.pem, a CA that signed nothing here."""
    import datetime

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    now = datetime.datetime.now(datetime.UTC)

    def certificate(subject: str, key, issuer: x509.Name, signer, *, ca: bool) -> x509.Certificate:
        builder = (
            x509.CertificateBuilder().subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, subject)]))
            .issuer_name(issuer).public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(hours=1)).not_valid_after(now + datetime.timedelta(days=2))
            .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True))
        if not ca:
            builder = (builder.add_extension(x509.SubjectAlternativeName(
                [x509.IPAddress(ipaddress.ip_address("127.0.0.1")), x509.DNSName("localhost")]), critical=False)
                .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False))
        return builder.sign(signer, hashes.SHA256())

    def pem(cert: x509.Certificate) -> bytes:
        return cert.public_bytes(serialization.Encoding.PEM)

    ca_key, other_key, server_key = (ec.generate_private_key(ec.SECP256R1()) for _ in range(3))
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "Test directory CA")])
    (work / "ca.pem").write_bytes(pem(certificate("Test directory CA", ca_key, ca_name, ca_key, ca=True)))
    other_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "Some other CA")])
    (work / "other-ca.pem").write_bytes(pem(certificate("Some other CA", other_key, other_name, other_key, ca=True)))
    (work / "cert.pem").write_bytes(pem(certificate("127.0.0.1", server_key, ca_name, ca_key, ca=False)))
    (work / "key.pem").write_bytes(server_key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()))


@pytest.fixture
def ldap_on(slapd):
    with override_settings(
        AUTHENTICATION_BACKENDS=["portal.login_backoff.LoginBackoffBackend",
                                 "django.contrib.auth.backends.ModelBackend", "portal.identity.ldap.LDAPBackend"],
        LDAP_AUTH_URL=[slapd.url], LDAP_AUTH_SEARCH_BASE=PEOPLE, LDAP_AUTH_BIND_TEMPLATE=f"uid={{username}},{PEOPLE}",
        LDAP_AUTH_CONNECTION_USERNAME=SERVICE_DN, LDAP_AUTH_CONNECTION_PASSWORD=SERVICE_PASSWORD,
        LDAP_GROUP_SEARCH_BASE=GROUPS, LDAP_GROUP_SEARCH_FILTER="(member={user_dn})",
        LDAP_USER_GROUPS_ATTRIBUTE="", IDENTITY_GROUP_ROLES=GROUP_ROLES,
    ):
        yield slapd


def _fresh_client() -> Client:  # a fresh client address: the sign-in rate limit is counted in the shared Redis
    return Client(REMOTE_ADDR=f"10.{uuid.uuid4().int % 250}.{uuid.uuid4().int % 250}.{uuid.uuid4().int % 250}")


@pytest.fixture
def client():
    return _fresh_client()


def _login(client, username, password):
    return client.post("/login/", {"username": username, "password": password})


def _roles(username):
    return sorted(Membership.objects.filter(user__username=username)
                  .values_list("workspace__slug", "role", "source"))


def _as_root(url):
    import ldap3

    return ldap3.Connection(ldap3.Server(url), ROOT_DN, ROOT_PASSWORD, auto_bind=True, raise_exceptions=True)


pytestmark = [pytest.mark.slow_server]


def test_directory_user_signs_in_through_the_form_and_gets_the_mapped_roles(ldap_on, client, tenants):
    response = _login(client, "alice-ldap", LDAP_PASSWORDS["alice-ldap"])
    assert response.status_code == 302 and response["Location"] == "/"
    user = get_user_model().objects.get(username="alice-ldap")
    assert (user.email, user.first_name, user.last_name) == ("alice-ldap@example.org", "Alice", "Directory")
    assert not user.has_usable_password()  # the directory keeps the password, never the portal
    assert _roles("alice-ldap") == [("vision-lab", Role.OWNER, "ldap")]  # the stronger of the two groups
    assert client.get("/w/vision-lab/").status_code == 200
    assert AuditEntry.objects.filter(action="group role added", message__contains="alice-ldap").exists()


def test_wrong_directory_password_is_an_ordinary_audited_failure(ldap_on, client, tenants):
    response = _login(client, "alice-ldap", "not-Her-password-1")
    assert response.status_code == 200 and "_auth_user_id" not in client.session
    assert not get_user_model().objects.filter(username="alice-ldap").exists()
    entry = AuditEntry.objects.get(action="login failed", username="alice-ldap")
    assert "wrong username or password" in entry.message and "not-Her-password-1" not in str(entry.__dict__)
    assert _login(client, "nobody-ldap", "Whatever-pass-1").status_code == 200  # unknown to the directory too
    assert AuditEntry.objects.filter(action="login failed", username="nobody-ldap").exists()


@override_settings(LOGIN_BACKOFF_FREE_FAILURES=2, LOGIN_BACKOFF_BASE_S=30)
def test_directory_accounts_are_under_the_same_back_off(ldap_on, client, tenants, clock):
    assert [_login(client, "bob-ldap", "wrong-Password-9").status_code for _ in range(3)] == [200, 429, 429]
    assert _login(client, "bob-ldap", LDAP_PASSWORDS["bob-ldap"]).status_code == 429  # the wait holds
    clock.advance(30)
    assert _login(client, "bob-ldap", LDAP_PASSWORDS["bob-ldap"]).status_code == 302


def test_a_group_taken_away_takes_the_role_away_but_never_a_hand_made_membership(ldap_on, client, tenants):
    import ldap3

    assert _login(client, "alice-ldap", LDAP_PASSWORDS["alice-ldap"]).status_code == 302
    user = get_user_model().objects.get(username="alice-ldap")
    MembershipFactory(user=user, workspace=tenants.nlp, role=Role.VIEWER)  # by hand, in the console
    owners = f"cn=ml-vision-owners,{GROUPS}"
    member = f"uid=alice-ldap,{PEOPLE}"
    with _as_root(ldap_on.url) as root:
        root.modify(owners, {"member": [(ldap3.MODIFY_REPLACE, [f"uid=bob-ldap,{PEOPLE}"])]})  # a group keeps one
    try:
        client.logout()
        assert _login(client, "alice-ldap", LDAP_PASSWORDS["alice-ldap"]).status_code == 302
        assert _roles("alice-ldap") == [("nlp-group", Role.VIEWER, ""), ("vision-lab", Role.VIEWER, "ldap")]
        with _as_root(ldap_on.url) as root:
            root.modify(f"cn=ml-vision-viewers,{GROUPS}", {"member": [(ldap3.MODIFY_REPLACE, [f"uid=bob-ldap,{PEOPLE}"])]})
        client.logout()
        assert _login(client, "alice-ldap", LDAP_PASSWORDS["alice-ldap"]).status_code == 302
        assert _roles("alice-ldap") == [("nlp-group", Role.VIEWER, "")]
        assert client.get("/w/vision-lab/").status_code == 404
    finally:
        with _as_root(ldap_on.url) as root:
            root.modify(owners, {"member": [(ldap3.MODIFY_REPLACE, [member])]})
            root.modify(f"cn=ml-vision-viewers,{GROUPS}", {"member": [(ldap3.MODIFY_REPLACE, [member])]})


def test_another_tenants_group_gives_no_access_to_the_first_workspace(ldap_on, client, tenants):
    assert _login(client, "bob-ldap", LDAP_PASSWORDS["bob-ldap"]).status_code == 302
    assert _roles("bob-ldap") == [("nlp-group", Role.MEMBER, "ldap")]
    assert client.get("/w/nlp-group/").status_code == 200
    assert client.get("/w/vision-lab/").status_code == 404


@pytest.mark.parametrize("username", ["*)(uid=*", "*", "alice-ldap)(|(uid=*", f"uid=alice-ldap,{PEOPLE}"])
def test_filter_or_dn_syntax_in_the_username_is_refused(ldap_on, client, tenants, username, monkeypatch):
    import ldap3

    monkeypatch.setattr(ldap3, "Connection", no_connection)  # refused before any directory is asked
    response = _login(client, username, LDAP_PASSWORDS["alice-ldap"])
    assert response.status_code == 200 and "_auth_user_id" not in client.session
    assert not get_user_model().objects.exclude(username__in=["admin", *PASSWORDS]).exists()
    assert AuditEntry.objects.filter(action="login failed", username=username).exists()


def test_the_directory_never_signs_in_or_changes_a_local_account(ldap_on, client, tenants):
    """The directory has an "alice" too: her directory password does not open the local alice."""
    email = tenants.alice.email
    assert _login(client, "alice", LDAP_PASSWORDS["alice"]).status_code == 200
    assert _login(client, "ALICE", LDAP_PASSWORDS["alice"]).status_code == 200  # the directory ignores case
    tenants.alice.refresh_from_db()
    assert (tenants.alice.email, tenants.alice.first_name) == (email, "")
    assert not get_user_model().objects.filter(username__iexact="alice").exclude(pk=tenants.alice.pk).exists()
    assert _login(client, "alice", PASSWORDS["alice"]).status_code == 302  # her own password still does


def test_local_sign_in_with_ldap_on_does_not_ask_the_directory(ldap_on, client, tenants, monkeypatch):
    import ldap3

    monkeypatch.setattr(ldap3, "Connection", no_connection)
    assert _login(client, "bob", PASSWORDS["bob"]).status_code == 302


def test_groups_read_from_the_users_member_of_attribute(ldap_on, client, tenants):
    """Active Directory's way (and OpenLDAP's memberof overlay): the groups come with the user's entry."""
    carol, analysts = f"uid=carol-ldap,{PEOPLE}", f"cn=vision-analysts,{GROUPS}"
    with _as_root(ldap_on.url) as root:  # added online, so the overlay writes carol's memberOf
        root.add(carol, ["inetOrgPerson"], {"uid": "carol-ldap", "cn": "Carol Directory", "sn": "Directory",
                                            "userPassword": "carol-ldap-Secret4"})
        root.add(analysts, ["groupOfNames"], {"cn": "vision-analysts", "member": [carol]})
    try:
        with override_settings(LDAP_USER_GROUPS_ATTRIBUTE="memberOf", LDAP_GROUP_SEARCH_BASE="",
                               IDENTITY_GROUP_ROLES={"vision-analysts": [{"workspace": "vision-lab", "role": "viewer"}]}):
            assert _login(client, "carol-ldap", "carol-ldap-Secret4").status_code == 302
        assert _roles("carol-ldap") == [("vision-lab", Role.VIEWER, "ldap")]
    finally:
        with _as_root(ldap_on.url) as root:
            root.delete(analysts)
            root.delete(carol)


def test_groups_that_cannot_be_read_refuse_the_sign_in(ldap_on, client, tenants):
    with override_settings(LDAP_GROUP_SEARCH_BASE=f"ou=missing,{SUFFIX}"):
        assert _login(client, "alice-ldap", LDAP_PASSWORDS["alice-ldap"]).status_code == 200
    assert "_auth_user_id" not in client.session and _roles("alice-ldap") == []
    assert AuditEntry.objects.filter(action="login failed", username="alice-ldap").exists()


def test_a_directory_that_is_down_is_a_quick_failed_sign_in(ldap_on, client, tenants):
    started = time.monotonic()
    with override_settings(LDAP_AUTH_URL=[f"ldap://127.0.0.1:{free_port()}"]):
        assert _login(client, "alice-ldap", LDAP_PASSWORDS["alice-ldap"]).status_code == 200
    assert time.monotonic() - started < 10
    assert _login(client, "bob", PASSWORDS["bob"]).status_code == 302  # local accounts are not held up


def test_start_tls_checks_the_directorys_certificate(ldap_on, client, tenants):
    with override_settings(LDAP_AUTH_USE_TLS=True, LDAP_AUTH_TLS_ARGS={"validate": ssl.CERT_REQUIRED}):
        assert _login(client, "bob-ldap", LDAP_PASSWORDS["bob-ldap"]).status_code == 200  # not a CA we trust
    with override_settings(LDAP_AUTH_USE_TLS=True,
                           LDAP_AUTH_TLS_ARGS={"validate": ssl.CERT_REQUIRED, "ca_certs_file": ldap_on.ca_file}):
        assert _login(client, "bob-ldap", LDAP_PASSWORDS["bob-ldap"]).status_code == 302


def test_direct_bind_as_the_person_alone_without_a_service_account(ldap_on, client, tenants):
    """The DN spelled from the name (LDAP_AUTH_BIND_TEMPLATE) and the person's own bind read their entry."""
    with override_settings(LDAP_AUTH_CONNECTION_USERNAME=None, LDAP_AUTH_CONNECTION_PASSWORD=None,
                           LDAP_GROUP_SEARCH_BASE=""):
        assert _login(client, "bob-ldap", "not-his-Password-1").status_code == 200
        assert _login(client, "bob-ldap", LDAP_PASSWORDS["bob-ldap"]).status_code == 302
    assert get_user_model().objects.get(username="bob-ldap").email == "bob-ldap@example.org"


@pytest.fixture
def search_then_bind(ldap_on):
    """The service account finds the person anywhere under the suffix; the template could spell only PEOPLE."""
    with override_settings(LDAP_AUTH_SEARCH_BASE=SUFFIX, LDAP_AUTH_USER_SEARCH_FILTER="(uid={username})"):
        yield ldap_on


def test_search_then_bind_signs_in_a_person_the_bind_template_cannot_spell(ldap_on, client, tenants):
    frank_password = SEARCHED["frank-ldap"][1]
    assert _login(client, "frank-ldap", frank_password).status_code == 200  # direct: uid=frank-ldap,ou=people
    with override_settings(LDAP_AUTH_SEARCH_BASE=SUFFIX, LDAP_AUTH_USER_SEARCH_FILTER="(uid={username})"):
        assert _login(client, "frank-ldap", "not-his-Password-1").status_code == 200  # the found DN's password
        assert "_auth_user_id" not in client.session
        assert _login(client, "frank-ldap", frank_password).status_code == 302
        assert _login(_fresh_client(), "alice-ldap", LDAP_PASSWORDS["alice-ldap"]).status_code == 302
    assert get_user_model().objects.get(username="frank-ldap").email == "frank-ldap@example.org"
    assert _roles("alice-ldap") == [("vision-lab", Role.OWNER, "ldap")]  # groups as with direct bind


def test_search_then_bind_refuses_a_name_that_finds_several_entries_or_none(search_then_bind, client, tenants,
                                                                            caplog):
    assert _login(client, "dup-ldap", SEARCHED["dup-ldap"][1]).status_code == 200
    assert "_auth_user_id" not in client.session
    assert not get_user_model().objects.filter(username="dup-ldap").exists()
    assert any("dup-ldap refused" in r.getMessage() for r in caplog.records)
    assert _login(client, "nobody-ldap", "Whatever-pass-1").status_code == 200
    assert AuditEntry.objects.filter(action="login failed", username="dup-ldap").exists()


def _ldaps(slapd, ca_file: str):
    from portal.settings.ldap import ldaps_connect_args

    tls_args = {"validate": ssl.CERT_REQUIRED, "ca_certs_file": ca_file}
    return override_settings(LDAP_AUTH_URL=[slapd.ldaps_url], LDAP_AUTH_CA_FILE=ca_file, LDAP_AUTH_TLS_ARGS=tls_args,
                             LDAP_AUTH_CONNECT_ARGS=ldaps_connect_args([slapd.ldaps_url], tls_args))


def test_ldaps_checks_the_directory_against_the_configured_ca(ldap_on, client, tenants, caplog):
    with _ldaps(ldap_on, ldap_on.ca_file):
        assert _login(client, "alice-ldap", LDAP_PASSWORDS["alice-ldap"]).status_code == 302
        with override_settings(LDAP_AUTH_SEARCH_BASE=SUFFIX, LDAP_AUTH_USER_SEARCH_FILTER="(uid={username})"):
            assert _login(_fresh_client(), "frank-ldap", SEARCHED["frank-ldap"][1]).status_code == 302
    assert not [r for r in caplog.records if "LDAP_AUTH_CA_FILE" in r.getMessage()]


def test_ldaps_with_a_ca_that_did_not_sign_the_directory_refuses_and_says_why(ldap_on, client, tenants, caplog):
    with _ldaps(ldap_on, ldap_on.other_ca_file):
        assert _login(client, "alice-ldap", LDAP_PASSWORDS["alice-ldap"]).status_code == 200
    assert "_auth_user_id" not in client.session
    assert not get_user_model().objects.filter(username="alice-ldap").exists()
    (said,) = [r for r in caplog.records if "LDAP_AUTH_CA_FILE" in r.getMessage()]
    assert said.levelname == "ERROR" and "not signed by the CA" in said.getMessage()
    assert ldap_on.other_ca_file in said.getMessage()
    assert AuditEntry.objects.filter(action="login failed", username="alice-ldap").exists()
