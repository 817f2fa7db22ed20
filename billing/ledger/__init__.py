"""The ledger: priced usage as stored charge lines, each rounded once; every total is a sum of them."""
