-- procrastinate_defer_jobs_v1, as procrastinate's defer_jobs query calls it: queue = the type $2,
-- lock = the group (TYPE:order_id), priority $4, scheduled_at $5 only when it is still to come (a job
-- deferred now has none), the tool's number and the group in args. procrastinate assigns the id.
select unnest(procrastinate_defer_jobs_v1(array[row(
    $2, 'pgmq_sim', $4, $2 || ':' || $3, null,
    jsonb_build_object('n', $1, 'order_id', $3, 'payload', encode($6, 'base64')),
    case when $5 > clock_timestamp() then $5 end
)::procrastinate_job_to_defer_v1])) as msg_id
