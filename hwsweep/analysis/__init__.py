"""After the runs: records judged (validation) and set aside when damaged (quarantine), the statistics,
the diagnosis of a difference, a suite's tables (aggregate) and the progress of a sweep (status).
Imports hwsweep.contracts only: it reads what runs wrote, never how they ran."""
