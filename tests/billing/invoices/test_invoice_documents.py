"""The invoice as a document: the PDF of the ai-lab account in Chinese, with CNY and 13 % VAT, read back with
poppler-utils (pdftotext, pdffonts); page one as a PNG for a person to look at; the e-mail to the contacts."""

import shutil
import subprocess
from pathlib import Path

import pytest

from billing.invoices import render
from billing.invoices import services as invoices
from billing.ledger.services import close_period
from billing.models import Invoice
from tests.billing.invoices.conftest import MARCH

pytestmark = [pytest.mark.django_db,
              pytest.mark.skipif(not shutil.which("pdftotext"), reason="needs poppler-utils (apt: poppler-utils)")]


@pytest.fixture
def invoice(tenants, books):
    for workspace in (tenants.vision, books.robotics):
        close_period(user=tenants.finance, workspace=workspace, month=MARCH)
    return Invoice.objects.get(account=books.account, period=MARCH)


def pdf_text(pdf: bytes, tmp_path: Path) -> tuple[str, str]:
    path = tmp_path / "invoice.pdf"
    path.write_bytes(pdf)
    text = subprocess.run(["pdftotext", "-layout", "-enc", "UTF-8", str(path), "-"], capture_output=True, text=True,
                          check=True).stdout
    fonts = subprocess.run(["pdffonts", str(path)], capture_output=True, text=True, check=True).stdout
    return text, fonts


def test_the_ai_lab_invoice_pdf_is_in_chinese_with_cny_and_13_percent_vat(invoice, tmp_path, artifacts):
    pdf = render.invoice_pdf(invoice)
    assert pdf.startswith(b"%PDF-")
    text, fonts = pdf_text(pdf, tmp_path)
    for shown in ("AIL-2026-0001", "人工智能实验室有限公司", "北京市海淀区中关村大街1号", "91110108MA01ABCD2X", "机器人组",
                  "CNY", "13 %", "¥113.00", "¥98.15", "¥12.77", "¥110.92", "-¥2.26", "2026-04-02", "2026-05-02",
                  "2026-03"):
        assert shown in text, shown
    assert "工作空间" in text and "金额" in text  # labels from the catalogue, in the account's language
    rows = [line.split() for line in fonts.splitlines()[2:] if line.strip()]
    assert rows and all(row[-5] == "yes" for row in rows), fonts  # the emb column: every font embedded
    assert any("WenQuanYi" in row[0] for row in rows), fonts
    if shutil.which("pdftoppm"):
        (tmp_path / "invoice.pdf").write_bytes(pdf)
        subprocess.run(["pdftoppm", "-png", "-r", "60", "-singlefile", str(tmp_path / "invoice.pdf"),
                        str(artifacts / "invoice-ai-lab-page1")], check=True)
        assert (artifacts / "invoice-ai-lab-page1.png").stat().st_size > 1000


def test_a_usd_account_invoice_is_in_the_platform_language_and_font(tenants, books, tmp_path):
    close_period(user=tenants.finance, workspace=tenants.nlp, month=MARCH)
    invoice = Invoice.objects.get(account=books.other)
    assert invoice.language == "en"
    text, fonts = pdf_text(render.invoice_pdf(invoice), tmp_path)
    assert "NLP-CO-2026-0001" in text and "$7.00" in text and "Workspace" in text
    assert "WenQuanYi" not in fonts


def test_a_credit_note_pdf_names_the_invoice_it_corrects(invoice, tenants, tmp_path):
    note = invoices.issue_credit_note(user=tenants.finance, invoice=invoice, amount="10", reason="GPU 故障")
    text, _ = pdf_text(render.invoice_pdf(note), tmp_path)
    assert "AIL-CN2026-0001" in text and "AIL-2026-0001" in text and "-¥11.30" in text and "GPU 故障" in text


def test_the_invoice_is_mailed_to_the_accounts_contacts_with_its_pdf(invoice, settings, mailoutbox):
    settings.EMAIL_BACKEND = "django.core.mail.backends.locmem.EmailBackend"
    assert render.mail_invoice(invoice) == 2
    (message,) = mailoutbox
    assert message.to == ["ap@ai-lab.example", "finance@ai-lab.example"]
    assert "AIL-2026-0001" in message.subject and "¥110.92" in message.body
    (name, content, kind), = message.attachments
    assert name == "AIL-2026-0001.pdf" and kind == "application/pdf" and content.startswith(b"%PDF-")
