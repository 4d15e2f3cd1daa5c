"""A directive whose content is reStructuredText made from files at build time
(the C header, the benchmark results): the one piece the local extensions share."""


def add_generated_directive(app, name, config_name, make_rst, dependencies, titles=False):
    """Register directive ``name``: ``make_rst(path, env)`` gives the lines to parse
    for the path in config value ``config_name``, and ``dependencies(path)`` the
    files whose change rebuilds the page. ``titles``: the lines may hold sections."""
    from pathlib import Path

    from docutils import nodes
    from docutils.parsers.rst import Directive
    from docutils.statemachine import StringList
    from sphinx.util.nodes import nested_parse_with_titles

    class Generated(Directive):
        has_content = False

        def run(self):
            env = self.state.document.settings.env
            path = Path(getattr(env.config, config_name))
            for dependency in dependencies(path):
                env.note_dependency(str(dependency))
            node = nodes.section()
            node.document = self.state.document
            content = StringList(make_rst(path, env), source=str(path))
            if titles:
                nested_parse_with_titles(self.state, content, node)
            else:
                self.state.nested_parse(content, self.content_offset, node)
            return node.children

    app.add_config_value(config_name, "", "env")
    app.add_directive(name, Generated)
    return {"version": "1", "parallel_read_safe": True, "parallel_write_safe": True}
