"""Write the default target's output for each schema (run under a given tree's PYTHONPATH)."""
import json, os, sys
import xgrammar as xg
from gramopt.formats import parse, write
from gramopt.passes import optimize
out_dir, files = sys.argv[1], sys.argv[2:]
for f in files:
    d = json.load(open(f)); s = d.get("schema", d)
    try:
        text = str(xg.Grammar.from_json_schema(json.dumps(s)))
    except Exception as e:
        print(os.path.basename(f), "converter refuses:", str(e)[:80]); continue
    g = parse(text, "ebnf")
    r = optimize(g)
    name = os.path.basename(f)[:-5]
    open(os.path.join(out_dir, name + ".in.ebnf"), "w").write(text)
    open(os.path.join(out_dir, name + ".out.ebnf"), "w").write(write(r.grammar, "ebnf"))
    print(name, len(g.rules), len(r.grammar.rules), r.report.notes[:1], flush=True)
