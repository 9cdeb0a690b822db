"""Package data: the Jinja templates bundles are rendered from (a package so a wheel ships them as
`a2c.templates`)."""
