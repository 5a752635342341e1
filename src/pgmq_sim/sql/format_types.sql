-- $1 type oids, $2 their modifiers: each as SQL names it (a described statement's result columns).
select format_type(t, m) from unnest($1::oid[], $2::int[]) with ordinality u(t, m, i) order by i
