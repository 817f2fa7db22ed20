"""Invoices and credit notes of billing accounts: issued from closed months, rendered as HTML and PDF."""
