"""How a result is shown: terminal tables, a JSON file, a picture. The engine imports none of it."""
